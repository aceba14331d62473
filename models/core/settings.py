"""Service settings, read from ``ACCESSGATE_*`` environment variables."""

import os
import re
import secrets
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: object) -> object:
    """``90s``, ``30m``, ``24h``, ``7d`` (or plain seconds) as a timedelta; ``0`` is zero."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", value)
        if match is None:
            raise ValueError("a duration such as 90s, 30m, 24h or 7d")
        number, unit = match.groups()
        return timedelta(seconds=float(number) * DURATION_UNITS[unit or "s"])
    return value


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]

SECRET_KEY_FILE = "secret_key"  # noqa: S105 - the file name, not a secret
LICENSE_SIGNING_KEY_FILE = "license_signing_key.pem"


class Settings(BaseSettings):
    """Everything the service can be configured with."""

    model_config = SettingsConfigDict(env_prefix="ACCESSGATE_", extra="ignore")

    data_dir: Path = Path("./data")
    database_url: str = Field(
        default="",
        description="SQLAlchemy URL; empty means a SQLite file in the data directory.",
    )
    auth: Literal["local", "oidc"] = Field(
        default="local",
        description="local: tokens signed by this service (accessgate token); "
        "oidc: the organization's OpenID provider.",
    )
    public_url: str = Field(
        default="http://127.0.0.1:8009",
        description="Where browsers reach this service; the OIDC callback is under it.",
    )
    oidc_issuer_url: str = ""
    oidc_client_id: str = ""
    oidc_client_secret: str = ""
    oidc_scopes: str = "openid email profile groups"
    oidc_groups_claim: str = "groups"
    oidc_redirect_url: str = Field(
        default="",
        description="Where the browser goes after sign-in, with the token; empty answers JSON.",
    )
    secret_key: str = Field(
        default="",
        description="Signs local tokens; empty means a key generated once into the data directory.",
    )
    token_ttl_seconds: int = Field(default=12 * 3600, gt=0)
    license_signing_key_file: Path | None = Field(
        default=None,
        description="PEM Ed25519 key signing the license; unset means the deployment's own, "
        "generated once and kept sealed in the database.",
    )
    license_plan: str = Field(default="community", min_length=1, max_length=64)
    license_validity_days: int = Field(default=30, gt=0, le=3660)

    slack_api_url: str = Field(
        default="https://slack.com/api/",
        description="Base URL of the Slack Web API for every Slack call (any Slack-compatible "
        "server).",
    )
    slack_match_email: bool = Field(
        default=False,
        description="Link a Slack user to the gateway user with the same verified e-mail "
        "address on first use, without the /accessgate link flow.",
    )
    slack_channel_messages_per_second: float = Field(
        default=1.0,
        gt=0,
        description="How fast new cards are posted to one channel (Slack allows about 1/s).",
    )
    outbox_lease_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="How long a deliverer holds an outbox event before another may take it.",
    )
    outbox_retention: Duration = Field(
        default=timedelta(days=7),
        ge=timedelta(0),
        description="How long delivered outbox events are kept before they are pruned "
        "(90s, 30m, 24h, 7d; 0 prunes them as soon as the next round runs).",
    )

    def license_key_path(self) -> Path:
        """The configured key file, or where versions before 0.2 generated one (imported once)."""
        return self.license_signing_key_file or self.data_dir / LICENSE_SIGNING_KEY_FILE

    def resolved_database_url(self) -> str:
        """Return the database URL, defaulting to SQLite under the data directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'accessgate.db').resolve()}"


@lru_cache
def get_settings() -> Settings:
    """Return the process-wide settings, read once from the environment."""
    return Settings()


def resolve_secret_key(settings: Settings) -> bytes:
    """Return the configured secret key, or the one generated once into the data directory.

    The generated file is created with ``O_EXCL`` and mode 0600 so that two processes starting
    together agree on one key and no other local user can read it.
    """
    if settings.secret_key:
        return settings.secret_key.encode()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    path = settings.data_dir / SECRET_KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes().strip()
    with os.fdopen(fd, "w") as key_file:
        key_file.write(secrets.token_urlsafe(48))
    return path.read_bytes().strip()
