"""Which Slack errors end a delivery for good, and how long a transient one waits."""

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.slack_response import SlackResponse

from bot.notifier import MAX_RETRY_SECONDS, is_permanent, permanent_note, retry_delay


def slack_error(error: str, status: int = 200) -> SlackApiError:
    response = SlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.test/api/chat.postMessage",
        req_args={},
        data={"ok": False, "error": error},
        headers={},
        status_code=status,
    )
    return SlackApiError(error, response)


@pytest.mark.parametrize(
    "error",
    [
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "invalid_blocks",
        "msg_too_long",
        "missing_scope",
        "msg_blocks_too_long",
        "user_disabled",
        "user_not_visible",
        "invalid_arguments",
        "restricted_action",
        "restricted_action_read_only_channel",
        "restricted_action_thread_only_channel",
    ],
)
def test_errors_no_retry_can_fix_end_the_delivery_with_their_reason(error):
    exc = slack_error(error)

    assert is_permanent(exc)
    assert permanent_note(exc, "card in C0DBA") == f"card in C0DBA: {error}"


@pytest.mark.parametrize(
    ("error", "status"),
    [("ratelimited", 429), ("internal_error", 500), ("fatal_error", 200), ("invalid_auth", 200)],
)
def test_transient_and_token_errors_are_raised_to_be_retried(error, status):
    exc = slack_error(error, status)

    assert not is_permanent(exc)
    with pytest.raises(SlackApiError):
        permanent_note(exc, "card in C0DBA")


def test_retries_back_off_exponentially_with_jitter_up_to_a_cap():
    for attempts in range(12):
        delays = {retry_delay(attempts) for _ in range(50)}
        base = min(2.0 * 2**attempts, MAX_RETRY_SECONDS)
        assert all(base / 2 <= delay <= base for delay in delays)
        assert len(delays) > 1, "jittered, so retries of many events do not come back at once"
    assert max(retry_delay(30) for _ in range(50)) <= MAX_RETRY_SECONDS
