"""Events out: signed HTTP deliveries to the endpoints admins register (Standard Webhooks)."""
