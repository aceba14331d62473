"""The transactional outbox and the leases consumers take on its events.

Knows nothing of any consumer (Slack, webhooks): they pick their lanes by event kind."""
