"""Properties of the envvars validator: what it accepts round-trips; refusals name the key."""

import base64
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from models.core import errors
from models.plugins.config import (
    MAX_DECODED_VALUE_BYTES,
    PluginConfigIn,
    check_runnable,
    decode_envvar_value,
)

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,40}", fullmatch=True)
values = st.binary(max_size=512)


@given(st.dictionaries(names, values, max_size=10))
def test_any_names_with_base64_values_are_accepted_and_decode_back(envvars):
    body = PluginConfigIn(
        envvars={name: base64.b64encode(value).decode() for name, value in envvars.items()}
    )

    assert body.decoded() == envvars


storable_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=40,
)


@given(name=storable_text.filter(lambda n: not re.fullmatch(r"[A-Za-z_]\w*", n, re.ASCII)))
def test_a_name_that_is_not_an_environment_variable_is_refused_by_name(name):
    with pytest.raises(ValidationError) as refused:
        PluginConfigIn(envvars={name: "eA=="})

    assert f"key {name!r} is not an environment-variable name" in str(refused.value)


@given(
    value=values,
    junk=st.sampled_from([" ", "\n", "-", "_", "!", "=", "A", "é"]),
    at=st.integers(0, 700),
)
def test_text_that_is_not_canonical_standard_base64_is_refused(value, junk, at):
    # One more character makes the length 1 modulo 4, which no base64 text has.
    encoded = base64.b64encode(value).decode()
    position = at % (len(encoded) + 1)
    corrupted = encoded[:position] + junk + encoded[position:]

    with pytest.raises(ValidationError) as refused:
        PluginConfigIn(envvars={"TOKEN": corrupted})

    assert "the value of TOKEN is not valid standard base64" in str(refused.value)


@given(value=st.binary(min_size=1, max_size=64))
def test_urlsafe_or_unpadded_base64_is_refused(value):
    standard = base64.b64encode(value).decode()
    variants = {base64.urlsafe_b64encode(value).decode(), standard.rstrip("=")} - {standard}

    for variant in variants:
        with pytest.raises(ValueError, match="not valid standard base64"):
            decode_envvar_value(variant)


@given(extra=st.integers(1, 3000))
def test_values_over_100_kb_decoded_are_refused(extra):
    encoded = base64.b64encode(b"\x00" * (MAX_DECODED_VALUE_BYTES + extra)).decode()

    with pytest.raises(ValueError, match="over 100 KB decoded"):
        decode_envvar_value(encoded)


@given(app=st.binary(max_size=40), bot=st.binary(max_size=40))
def test_chat_runs_only_with_an_app_token_and_a_bot_token(app, bot):
    values = {"CHAT_APP_TOKEN": app, "CHAT_BOT_TOKEN": bot}
    usable = (
        app.startswith(b"xapp-")
        and bot.startswith(b"xoxb-")
        and app.isascii()
        and bot.isascii()
        and b" " not in app + bot
    )

    if usable:
        check_runnable("chat", values)
    else:
        with pytest.raises(errors.UnusableConfiguration):
            check_runnable("chat", values)


def test_other_plugins_run_with_any_configuration():
    check_runnable("webhooks", {})
    check_runnable("review", {"ANYTHING": b"\x00"})
