"""Service settings, read from ``ACCESSGATE_*`` environment variables."""

import contextlib
import os
import re
import secrets
import tempfile
import time
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator
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

MIN_SECRET_KEY_BYTES = 32
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
        description="Where browsers reach this service: the base of every link it writes "
        "(review pages, account links, the OIDC callback).",
    )
    oidc_issuer_url: str = ""
    oidc_client_id: str = ""
    oidc_client_secret: str = ""
    oidc_scopes: str = "openid email profile groups"
    oidc_groups_claim: str = "groups"
    oidc_jwks_refetch_seconds: float = Field(
        default=60.0,
        ge=0,
        description="A token signed with an unknown key fetches the provider's keys again at "
        "most this often.",
    )
    oidc_audience: str = Field(
        default="",
        description="The audience of the provider's JWT access tokens for this API; with it, "
        "such tokens are verified locally. Empty: only typ at+jwt tokens are, any other token "
        "is checked at the provider's userinfo endpoint.",
    )
    oidc_redirect_url: str = Field(
        default="",
        description="Where the browser goes after sign-in, with the token; empty answers JSON.",
    )
    secret_key: str = Field(
        default="",
        description="Signs local tokens and seals secrets; at least 32 bytes. Empty means a key "
        "generated once into the data directory.",
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

    review_expires_after: Duration = Field(
        default=timedelta(hours=24),
        ge=timedelta(0),
        description="A review still pending this long after it was filed is rejected as "
        "expired (90s, 30m, 24h, 7d; 0 turns expiry off).",
    )
    review_remind_after: Duration = Field(
        default=timedelta(minutes=30),
        ge=timedelta(0),
        description="A review still pending this long is reminded to its reviewers, and again "
        "every interval (0 turns reminders off).",
    )
    review_reminders: int = Field(
        default=3, ge=0, le=100, description="At most this many reminders per review."
    )
    scheduler_interval_seconds: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="How often each replica looks for expiries, reminders and ended access "
        "that are due.",
    )

    webhook_retry_schedule: str = Field(
        default="5s,5m,30m,2h,5h,10h,10h",
        description="The waits between a webhook delivery's attempts (about a day in all); "
        "after the last, the delivery is failed.",
    )
    webhook_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="How long one webhook attempt may take."
    )

    metrics_token: str = Field(
        default="",
        description="When set, GET /metrics wants it as a bearer token; empty leaves /metrics "
        "open (serve it on a private network).",
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="text for a terminal; json: one JSON object per line."
    )

    max_body_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Larger request bodies are refused with 413 before they are read.",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="A request body that takes longer to arrive is refused with 408.",
    )
    header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="A connection whose request headers take longer to arrive is closed.",
    )

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _a_schedule(cls, schedule: str) -> str:
        waits = [part for part in schedule.split(",") if part.strip()]
        if not waits:
            raise ValueError("at least one wait, e.g. 5s,5m,30m")
        for wait in waits:
            parse_duration(wait)
        return schedule

    def retry_waits(self) -> list[timedelta]:
        """The webhook retry schedule as waits."""
        return [
            duration
            for part in self.webhook_retry_schedule.split(",")
            if part.strip() and isinstance(duration := parse_duration(part), timedelta)
        ]

    @field_validator("secret_key")
    @classmethod
    def _long_enough(cls, key: str) -> str:
        if key and len(key.encode()) < MIN_SECRET_KEY_BYTES:
            raise ValueError(
                f"must be at least {MIN_SECRET_KEY_BYTES} bytes (it is "
                f"{len(key.encode())}); make one with: python3 -c 'import secrets; "
                "print(secrets.token_urlsafe(48))'"
            )
        return key

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

    The generated key is written whole to a private temporary file, then linked to its name,
    which fails if another process linked its key first: every process starting together reads
    one complete key, never an empty or half-written file.
    """
    if settings.secret_key:
        return settings.secret_key.encode()
    data_dir = private_data_dir(settings)
    path = data_dir / SECRET_KEY_FILE
    if not path.exists():
        fd, draft = tempfile.mkstemp(dir=data_dir, prefix=f".{SECRET_KEY_FILE}.")
        try:
            with os.fdopen(fd, "w") as draft_file:  # mkstemp makes it 0600
                draft_file.write(secrets.token_urlsafe(48))
                draft_file.flush()
                os.fsync(draft_file.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(draft, path)
        finally:
            os.unlink(draft)
    return _read_complete_key(path)


def _read_complete_key(path: Path) -> bytes:
    # A key file written by a version before the atomic link could be seen while it was being
    # written; wait a moment for it rather than start with an empty key.
    for _ in range(50):
        key = path.read_bytes().strip()
        if len(key) >= MIN_SECRET_KEY_BYTES:
            return key
        time.sleep(0.1)
    raise RuntimeError(f"{path} holds no usable secret key; remove it to generate a new one")


def private_data_dir(settings: Settings) -> Path:
    """The data directory, created readable by this user only (it holds keys and the database)."""
    settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return settings.data_dir
