"""A plugin's top-level configuration: environment-variable names to base64 values (spec 4.2).

Two levels of refusal, kept apart on purpose:

- a body that is not such a mapping (bad name, not standard base64, too large) is malformed
  input, refused by the request model with a message naming the key;
- a well-formed mapping the plugin cannot run with (the chat plugin without its Slack tokens)
  is refused by ``check_runnable`` as an unusable configuration.

The chat plugin runs with CHAT_BOT_TOKEN plus CHAT_APP_TOKEN (Socket Mode, the default: no
public URL needed) and/or CHAT_SIGNING_SECRET (HTTP mode, ``POST /slack/events``), and posts
every card to CHAT_DEFAULT_CHANNEL as well when it is set.
"""

import base64
import re
import uuid
from collections.abc import Callable, Mapping

import pydantic
from pydantic import field_validator

from models.core import errors
from models.core.request_body import RequestBody

ENVVAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Canonical padded standard base64, as the decoder below accepts it (the last character before
# padding carries no stray bits); stated in the OpenAPI document.
STANDARD_BASE64 = re.compile(
    r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?"
)
MAX_ENVVAR_NAME = 128
MAX_ENVVARS = 64
MAX_DECODED_VALUE_BYTES = 100 * 1024
# Base64 of the largest allowed value; longer text is refused before it is decoded.
MAX_ENCODED_VALUE_CHARS = 4 * -(-MAX_DECODED_VALUE_BYTES // 3)
REDACTED = "REDACTED"

CHAT_APP_TOKEN = "CHAT_APP_TOKEN"  # noqa: S105 - variable names, not secrets
CHAT_BOT_TOKEN = "CHAT_BOT_TOKEN"  # noqa: S105
CHAT_SIGNING_SECRET = "CHAT_SIGNING_SECRET"  # noqa: S105
CHAT_DEFAULT_CHANNEL = "CHAT_DEFAULT_CHANNEL"
CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,63}")


def envvar_name_problem(name: str) -> str | None:
    """Why ``name`` is not an environment-variable name, or None if it is one."""
    if not ENVVAR_NAME.fullmatch(name):
        return "is not an environment-variable name (letters, digits and _, not first a digit)"
    if len(name) > MAX_ENVVAR_NAME:
        return f"is longer than {MAX_ENVVAR_NAME} characters"
    return None


def decode_envvar_value(value: str) -> bytes:
    """Decode canonical standard base64 (``+/``, padded), or raise ValueError saying why."""
    if len(value) > MAX_ENCODED_VALUE_CHARS:
        raise ValueError(f"is over {MAX_DECODED_VALUE_BYTES // 1024} KB decoded")
    try:
        decoded = base64.b64decode(value, validate=True)
    except ValueError as exc:  # binascii.Error, or text that is not ASCII at all
        raise ValueError("is not valid standard base64") from exc
    # Re-encoding catches the leniencies of the decoder (stray padding bits): one text per value.
    if base64.b64encode(decoded).decode() != value:
        raise ValueError("is not valid standard base64")
    if len(decoded) > MAX_DECODED_VALUE_BYTES:
        raise ValueError(f"is over {MAX_DECODED_VALUE_BYTES // 1024} KB decoded")
    return decoded


def decode_envvars(envvars: Mapping[str, str]) -> dict[str, bytes]:
    """Validate names and values; return the decoded values. ValueError names the bad key."""
    if len(envvars) > MAX_ENVVARS:
        raise ValueError(f"at most {MAX_ENVVARS} variables")
    decoded: dict[str, bytes] = {}
    for name, value in envvars.items():
        problem = envvar_name_problem(name)
        if problem is not None:
            raise ValueError(f"key {name!r} {problem}")
        if value == REDACTED:  # what every response shows: the stored value, kept
            continue
        try:
            decoded[name] = decode_envvar_value(value)
        except ValueError as exc:
            raise ValueError(f"the value of {name} {exc}") from exc
    return decoded


class PluginConfigIn(RequestBody):
    """Body of ``PUT /plugins/{name}/config``: values are standard base64 of the real value."""

    id: uuid.UUID | None = pydantic.Field(
        default=None, description="Read-only (what GET shows); ignored."
    )

    envvars: dict[str, str] = pydantic.Field(
        description="Environment-variable names to standard base64 values (each at most 100 KB "
        "decoded). Stored encrypted; every response shows them as REDACTED, and REDACTED sent "
        "back keeps the value stored.",
        json_schema_extra={
            "maxProperties": MAX_ENVVARS,
            "propertyNames": {"pattern": f"^{ENVVAR_NAME.pattern}$", "maxLength": MAX_ENVVAR_NAME},
            "additionalProperties": {
                "type": "string",
                "pattern": f"^(?:{STANDARD_BASE64.pattern}|{REDACTED})$",
                "maxLength": MAX_ENCODED_VALUE_CHARS,
            },
        },
        examples=[{CHAT_APP_TOKEN: "eGFwcC0xLUExLTEtYWJj", CHAT_BOT_TOKEN: "eG94Yi0xLTEtYWJj"}],
    )

    @field_validator("envvars")
    @classmethod
    def _valid_names_and_values(cls, envvars: dict[str, str]) -> dict[str, str]:
        decode_envvars(envvars)
        return envvars

    def decoded(self) -> dict[str, bytes]:
        """The values sent, decoded (validated already); REDACTED ones are not among them."""
        return decode_envvars(self.envvars)

    def kept(self) -> list[str]:
        """The variables sent back as REDACTED: they keep the value stored."""
        return sorted(name for name, value in self.envvars.items() if value == REDACTED)


def _check_chat(values: Mapping[str, bytes]) -> None:
    if CHAT_BOT_TOKEN not in values:
        raise errors.UnusableConfiguration(f"the chat plugin needs {CHAT_BOT_TOKEN}; it is missing")
    _check_token(values, CHAT_BOT_TOKEN, "xoxb-", "a bot token")
    if CHAT_APP_TOKEN not in values and CHAT_SIGNING_SECRET not in values:
        raise errors.UnusableConfiguration(
            f"the chat plugin needs {CHAT_APP_TOKEN} (Socket Mode) or {CHAT_SIGNING_SECRET} "
            "(HTTP mode); both are missing"
        )
    if CHAT_APP_TOKEN in values:
        _check_token(values, CHAT_APP_TOKEN, "xapp-", "an app-level token")
    if CHAT_SIGNING_SECRET in values and not _is_token_text(values[CHAT_SIGNING_SECRET]):
        raise errors.UnusableConfiguration(
            f"{CHAT_SIGNING_SECRET} must be the app's signing secret"
        )
    channel = values.get(CHAT_DEFAULT_CHANNEL)
    if channel is not None and not CHANNEL_ID.fullmatch(channel.decode("ascii", "replace")):
        raise errors.UnusableConfiguration(
            f"{CHAT_DEFAULT_CHANNEL} must be a channel id such as C0123456789, not a name"
        )


def _check_token(values: Mapping[str, bytes], name: str, prefix: str, kind: str) -> None:
    value = values[name]
    if not value.startswith(prefix.encode()) or not _is_token_text(value):
        raise errors.UnusableConfiguration(f"{name} must decode to {kind} starting with {prefix!r}")


def _is_token_text(value: bytes) -> bool:
    return bool(value) and value.isascii() and not any(byte <= 0x20 for byte in value)


# Keyed by plugin name (models.plugins.PluginName values; that module builds on this one).
RUNNABILITY_CHECKS: dict[str, Callable[[Mapping[str, bytes]], None]] = {
    "chat": _check_chat,
}


def check_runnable(name: str, values: Mapping[str, bytes]) -> None:
    """Raise UnusableConfiguration if the plugin cannot run with these values."""
    check = RUNNABILITY_CHECKS.get(name)
    if check is not None:
        check(values)
