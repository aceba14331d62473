"""The base of every request body: unknown fields and text no backend can store are refused.

PostgreSQL cannot store NUL in text, neither backend can store lone UTF-16 surrogates (JSON lets
a client send ``"\\ud800"``), and a field the service does not know is a mistake the client should
hear about rather than data silently dropped.
"""

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

MAX_DURATION_NS = 366 * 24 * 3600 * 1_000_000_000
"""Durations are bounded (a year) so they fit every backend's 64-bit integers."""


def is_storable_text(text: str) -> bool:
    """Whether ``text`` is valid Unicode without NUL characters."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _contains_unstorable_text(value: Any) -> bool:
    # Iterative, so a deeply nested body is refused rather than exhausting the stack.
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not is_storable_text(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return False


def _whole_number(value: Any) -> Any:
    # JSON has one number type: 60 and 60.0 are the same integer. Anything else goes on to a
    # strict integer check, which refuses "60" and true: a typo must not pass for a value.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WHOLE_NUMBER = BeforeValidator(_whole_number)
"""Put after a strict integer's constraints, so the OpenAPI document keeps stating them."""

JsonInt = Annotated[int, Field(strict=True), WHOLE_NUMBER]
"""An integer in a request body: a JSON number without a fraction, never a string or boolean."""


def max_utf8_bytes(limit: int) -> AfterValidator:
    """Refuses text longer than ``limit`` bytes of UTF-8: what it takes to store and send.

    A character bound alone lets through four times as many bytes (every character an emoji).
    """

    def _check(text: str) -> str:
        if len(text.encode("utf-8", "surrogatepass")) > limit:
            raise ValueError(f"at most {limit:,} bytes of UTF-8")
        return text

    return AfterValidator(_check)


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _refuse_unstorable_text(cls, data: Any) -> Any:
        if _contains_unstorable_text(data):
            raise ValueError("text may not contain NUL characters or unpaired surrogates")
        return data
