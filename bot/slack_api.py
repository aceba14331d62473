"""Slack Web API clients pointed at ACCESSGATE_SLACK_API_URL, and the check of new tokens."""

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from models.core import errors
from models.core.metrics import SLACK_CALLS, SLACK_RATE_LIMITED
from models.plugins.config import CHAT_APP_TOKEN, CHAT_BOT_TOKEN

logger = logging.getLogger("accessgate.bot")

CHECK_TIMEOUT_SECONDS = 10
# Errors meaning "these tokens will never work", as opposed to Slack being unwell right now.
TOKEN_REFUSALS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
        "invalid_token",
        "team_access_not_granted",
        "ekm_access_denied",
    }
)

# The bot token's scopes, by what needs them (manifest.yml asks for the first set only).
ALWAYS_NEEDED_SCOPES = {
    "chat:write": "to post and rewrite review cards and answer people",
    "im:write": "to send requesters their decisions as direct messages",
    "commands": "to answer /accessgate",
    "channels:history": "to find a card whose post got no answer from Slack, in public channels",
    "groups:history": "the same in private channels",
}
EMAIL_MATCHING_SCOPES = {
    "users:read": "to look up who clicked, for ACCESSGATE_SLACK_MATCH_EMAIL",
    "users:read.email": "to read their e-mail address, for ACCESSGATE_SLACK_MATCH_EMAIL",
}


def needed_scopes(*, match_email: bool) -> dict[str, str]:
    """The bot scopes the enabled features need, each with why."""
    return {**ALWAYS_NEEDED_SCOPES, **(EMAIL_MATCHING_SCOPES if match_email else {})}


def missing_scopes(granted_header: str | None, *, match_email: bool) -> dict[str, str]:
    """Needed scopes absent from auth.test's ``x-oauth-scopes``; none when Slack did not say."""
    if granted_header is None:
        return {}
    granted = {scope.strip() for scope in granted_header.split(",")}
    needed = needed_scopes(match_email=match_email)
    return {scope: why for scope, why in needed.items() if scope not in granted}


class CountedWebClient(AsyncWebClient):
    """The Web API client, counting each call by method and answer for ``/metrics``."""

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        try:
            answer = await super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            status = exc.response.status_code if exc.response is not None else None
            SLACK_CALLS.labels(api_method, str(status or "error")).inc()
            if status == 429:
                SLACK_RATE_LIMITED.labels(api_method).inc()
            raise
        except Exception:
            SLACK_CALLS.labels(api_method, "error").inc()
            raise
        SLACK_CALLS.labels(api_method, str(answer.status_code)).inc()
        return answer


def web_client(*, token: str, api_url: str) -> AsyncWebClient:
    """A client that retries briefly on its own (429 after Retry-After, 5xx, lost connections).

    Longer outages are the outbox's business: a delivery that still fails is postponed there.
    """
    retry_handlers: list[AsyncRetryHandler] = [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        AsyncRateLimitErrorRetryHandler(max_retry_count=2),
        AsyncServerErrorRetryHandler(max_retry_count=2),
    ]
    return CountedWebClient(token=token, base_url=api_url, retry_handlers=retry_handlers)


# Long enough for a slow Slack; short enough that a post whose answer never came is soon looked
# for in the channel (see ``models.chat.messages``) and delivered by the next attempt.
POST_TIMEOUT_SECONDS = 10


def poster_client(*, token: str, api_url: str) -> AsyncWebClient:
    """A client for new messages: no retries of its own.

    Slack cannot de-duplicate a repeated chat.postMessage, so a post that got no answer (or a
    5xx) may have landed; the outbox retries it after looking for it, and a 429 is paced for
    every replica, never just slept on here.
    """
    return CountedWebClient(
        token=token, base_url=api_url, timeout=POST_TIMEOUT_SECONDS, retry_handlers=[]
    )


def is_token_refusal(error: SlackApiError) -> bool:
    """Slack refuses the token itself, so retrying cannot help."""
    return error.response.get("error") in TOKEN_REFUSALS


def check_chat_tokens(values: Mapping[str, bytes], *, api_url: str, match_email: bool) -> None:
    """Raise UnusableConfiguration if Slack refuses a token, or the bot lacks a needed scope.

    Each token is checked. A Slack that cannot be reached, or answers with something other
    than a refusal, is not the configuration's fault: that token's check passes and the bot
    keeps retrying with what was stored.
    """
    checks = [(CHAT_BOT_TOKEN, "auth.test")]
    if CHAT_APP_TOKEN in values:
        # Opening a Socket Mode URL is the only call an app-level token can prove itself with.
        checks.append((CHAT_APP_TOKEN, "apps.connections.open"))
    for name, method in checks:
        client = WebClient(
            token=values[name].decode("ascii"), base_url=api_url, timeout=CHECK_TIMEOUT_SECONDS
        )
        try:
            answer = client.api_call(method)
        except SlackApiError as exc:
            if is_token_refusal(exc):
                raise errors.UnusableConfiguration(
                    f"Slack refused {name}: {exc.response.get('error')}"
                ) from exc
            logger.warning("Slack could not check %s now (%s); storing it", name, exc)
            continue
        except (SlackClientError, OSError) as exc:
            logger.warning("Slack cannot be reached to check %s (%s); storing it", name, exc)
            continue
        if name == CHAT_BOT_TOKEN:
            scopes = answer.headers.get("x-oauth-scopes")
            missing = missing_scopes(scopes, match_email=match_email)
            if missing:
                needs = "; ".join(f"{scope} {why}" for scope, why in missing.items())
                raise errors.UnusableConfiguration(
                    f"the CHAT_BOT_TOKEN lacks Slack scopes accessgate needs: {needs}. Add them "
                    "under OAuth & Permissions, reinstall the app and send its new bot token"
                )
