"""The accessgate domain: tables, the review state machine, services and storage.

Imports neither FastAPI nor Slack Bolt: both transports call into this package.
"""
