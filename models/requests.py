"""The base of every request body: unknown fields and NUL characters are refused.

PostgreSQL cannot store NUL in text, and a field the service does not know is a mistake the
client should hear about rather than data silently dropped.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

MAX_DURATION_NS = 366 * 24 * 3600 * 1_000_000_000
"""Durations are bounded (a year) so they fit every backend's 64-bit integers."""


def _contains_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_contains_nul(key) or _contains_nul(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(_contains_nul(item) for item in value)
    return False


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _refuse_nul(cls, data: Any) -> Any:
        if _contains_nul(data):
            raise ValueError("text may not contain NUL characters")
        return data
