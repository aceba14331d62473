"""Sidecars: registration, token authentication, the handshake and its signed license."""
