"""Sealed configuration values: they open only with the same key and the same context."""

import pytest

from models.core.sealing import SecretBox, UnsealError

BOX = SecretBox(b"one secret key")


def test_a_sealed_value_opens_with_its_key_and_context():
    sealed = BOX.seal(b"xoxb-secret", context="plugin:1:CHAT_BOT_TOKEN")

    assert b"xoxb-secret" not in sealed.encode()
    assert BOX.open(sealed, context="plugin:1:CHAT_BOT_TOKEN") == b"xoxb-secret"


def test_sealing_twice_gives_different_texts():
    assert BOX.seal(b"same", context="c") != BOX.seal(b"same", context="c")


@pytest.mark.parametrize(
    "attempt",
    [
        lambda sealed: BOX.open(sealed, context="plugin:1:CHAT_APP_TOKEN"),
        lambda sealed: BOX.open(sealed, context="plugin:2:CHAT_BOT_TOKEN"),
        lambda sealed: SecretBox(b"another key").open(sealed, context="plugin:1:CHAT_BOT_TOKEN"),
        lambda sealed: BOX.open(sealed[:-4] + "AAA=", context="plugin:1:CHAT_BOT_TOKEN"),
        lambda sealed: BOX.open("v2." + sealed[3:], context="plugin:1:CHAT_BOT_TOKEN"),
        lambda sealed: BOX.open("v1.!!", context="plugin:1:CHAT_BOT_TOKEN"),
    ],
    ids=["other key name", "other plugin", "other secret key", "tampered", "format", "garbage"],
)
def test_a_moved_tampered_or_foreign_value_does_not_open(attempt):
    sealed = BOX.seal(b"xoxb-secret", context="plugin:1:CHAT_BOT_TOKEN")

    with pytest.raises(UnsealError):
        attempt(sealed)
