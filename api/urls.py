"""The path prefix of the API, and the service's address as the command-line clients take it."""

from urllib.parse import urlsplit

API_PREFIX = "/api"


def api_base(url: str) -> str:
    """The API base for a server URL or an API URL (``/api`` is added when missing)."""
    base = url.rstrip("/")
    return base if urlsplit(base).path.endswith(API_PREFIX) else f"{base}{API_PREFIX}"
