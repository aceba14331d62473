"""What every feature shares: settings, domain errors, the clock, sealing, the database."""
