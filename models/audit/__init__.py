"""The audit trail: every security-relevant act, recorded once, append-only."""
