"""The Web API of the loopback Slack workspace."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
import math
import secrets
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from testing.slack.blocks import auto_id, check_blocks, check_text
from testing.slack.records import (
    MAX_MESSAGE_BLOCKS,
    METHOD_SCOPES,
    ApiCall,
    ApiError,
    AppRecord,
    Bucket,
    Call,
    Failure,
    Message,
    UserRecord,
)
from testing.slack.views import Views

JSONDict = dict[str, Any]


def failure_error(failure: Failure) -> ApiError:
    """The answer of a call made to fail (``Workspace.fail``)."""
    headers = {"Retry-After": str(failure.retry_after)} if failure.status == 429 else {}
    return ApiError(failure.error, status=failure.status, headers=headers)


class WebApi(Views):
    """``POST /api/{method}``: Slack's Web API with its answers, errors and pacing."""

    @functools.cached_property
    def _methods(self) -> dict[str, Callable[[ApiCall], JSONDict]]:
        return {
            "auth.test": self._auth_test,
            "apps.connections.open": self._apps_connections_open,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.delete": self._chat_delete,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "conversations.open": self._conversations_open,
            "conversations.info": self._conversations_info,
            "conversations.history": self._conversations_history,
            "views.open": self._views_open,
            "views.push": self._views_push,
            "views.update": self._views_update,
            "views.publish": self._views_publish,
            "users.info": self._users_info,
            "users.lookupByEmail": self._users_lookup_by_email,
        }

    async def _api_endpoint(self, request: Request) -> Response:
        method = request.path_params["method"]
        params: JSONDict = dict(request.query_params)
        token: str | None = None
        raw = await request.body()
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        body_error: str | None = None
        if raw:
            if content_type == "application/json":
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                if isinstance(body, dict):
                    body.pop("token", None)  # Slack ignores tokens in JSON bodies
                    params.update(body)
                else:
                    body_error = "invalid_json"
            elif content_type in {"application/x-www-form-urlencoded", ""}:
                params.update(parse_qsl(raw.decode(), keep_blank_values=True))
            else:
                body_error = "invalid_form_data"
        authorization = request.headers.get("authorization", "")
        if authorization.lower().startswith("bearer "):
            token = authorization[7:].strip()
            params.pop("token", None)
        else:
            token = params.pop("token", None) or None
        for key in ("blocks", "attachments", "view", "metadata"):
            if isinstance(params.get(key), str) and params[key].strip()[:1] in {"[", "{"}:
                with contextlib.suppress(ValueError):
                    params[key] = json.loads(params[key])
        with self._cond:
            delays = self._delays.get(method)
            delay = delays.pop(0) if delays else 0.0
        if delay:
            await asyncio.sleep(delay)
        status, answer, headers = self._handle_api(method, params, token, body_error)
        return JSONResponse(answer, status_code=status, headers=headers)

    def _handle_api(
        self, method: str, params: JSONDict, token: str | None, body_error: str | None
    ) -> tuple[int, JSONDict, dict[str, str]]:
        with self._cond:
            status, headers = 200, {}
            try:
                failure = self._next_failure(method)
                if failure is not None and not failure.after_handling:
                    raise failure_error(failure)
                if body_error is not None:
                    raise ApiError(body_error)
                handler = self._methods.get(method)
                if handler is None:
                    raise ApiError("unknown_method")
                app = self._authenticate(method, token)
                assert token is not None
                self._check_scope(method, token)
                answer = {"ok": True, **handler(ApiCall(app, token, params))}
                if failure is not None:
                    raise failure_error(failure)
                if method == "auth.test" and token in self._token_scopes:
                    headers = {"x-oauth-scopes": ",".join(sorted(self._token_scopes[token]))}
            except ApiError as error:
                status, headers, answer = error.status, error.headers, error.body()
            self._calls.append(
                Call(
                    method=method,
                    params=copy.deepcopy(params),
                    token=token,
                    time=time.monotonic(),
                    status=status,
                    error=None if answer.get("ok") else str(answer.get("error")),
                )
            )
            self._cond.notify_all()
            return status, answer, headers

    def _next_failure(self, method: str) -> Failure | None:
        failures = self._failures.get(method)
        if not failures:
            return None
        failure = failures[0]
        failure.times -= 1
        if failure.times <= 0:
            failures.pop(0)
        return failure

    def _authenticate(self, method: str, token: str | None) -> AppRecord:
        if not token:
            raise ApiError("not_authed")
        entry = self._tokens.get(token)
        if entry is None or token in self._revoked:
            raise ApiError("invalid_auth")
        app, kind = entry
        if kind != ("app" if method == "apps.connections.open" else "bot"):
            raise ApiError("not_allowed_token_type")
        return app

    def _check_scope(self, method: str, token: str) -> None:
        needed = METHOD_SCOPES.get(method)
        if needed is not None:
            self._check_scope_named(needed, token)

    def _check_scope_named(self, needed: str, token: str) -> None:
        granted = self._token_scopes.get(token)
        if granted is None or needed in granted:
            return
        provided = ",".join(sorted(granted))
        raise ApiError("missing_scope", extra={"needed": needed, "provided": provided})

    def _check_membership(self, channel: str) -> None:
        if channel in self._channels_without_bot:
            raise ApiError("not_in_channel")

    def _next_ts(self) -> str:
        micros = max(int(time.time() * 1_000_000), self._last_ts_micros + 1)
        self._last_ts_micros = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _resolve_channel(self, requested: Any) -> str:
        if not isinstance(requested, str) or not requested:
            raise ApiError("channel_not_found")
        channel: str = requested
        if channel.startswith("#"):
            named = [cid for cid, name in self._channel_names.items() if name == channel[1:]]
            if not named:
                raise ApiError("channel_not_found")
            channel = named[0]
        if channel in self._removed_channels:
            raise ApiError("channel_not_found")
        if channel[0] in {"U", "W"}:
            dm = self.dm_channel_id(channel)
            self._dm_users[dm] = channel
            return dm
        if channel[0] in {"C", "G"} or channel in self._dm_users:
            return channel
        raise ApiError("channel_not_found")

    def _pace(self, channel: str) -> None:
        if self._pacing is None:
            return
        rate, burst = self._pacing
        now = time.monotonic()
        bucket = self._buckets.setdefault(channel, Bucket(float(burst), now))
        bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        self._pacing_violations += 1
        retry_after = max(1, math.ceil((1.0 - bucket.tokens) / rate))
        raise ApiError("ratelimited", status=429, headers={"Retry-After": str(retry_after)})

    def _metadata(self, params: JSONDict) -> JSONDict | None:
        metadata = params.get("metadata")
        if metadata in (None, ""):
            return None
        if not isinstance(metadata, dict) or not isinstance(metadata.get("event_type"), str):
            raise ApiError("invalid_metadata_format")
        return copy.deepcopy(metadata)

    def _store_message(
        self,
        app: AppRecord,
        channel: str,
        text: str,
        blocks: list[JSONDict],
        metadata: JSONDict | None,
        thread_ts: str | None,
    ) -> Message:
        message = Message(
            channel=channel,
            ts=self._next_ts(),
            text=text,
            blocks=blocks,
            metadata=metadata,
            thread_ts=thread_ts,
            user=app.bot_user_id,
            posted_at=time.monotonic(),
            app_id=app.app_id,
            bot_id=app.bot_id,
            team_id=app.team_id,
        )
        self._messages.append(message)
        self._messages_by_key[(channel, message.ts)] = message
        return message

    def _update_message(
        self,
        message: Message,
        text: str | None,
        blocks: list[JSONDict] | None,
        metadata: JSONDict | None,
    ) -> None:
        message.history.append((message.text, message.blocks))
        if text is not None:
            message.text = text
        if blocks is not None:
            message.blocks = blocks
        if metadata is not None:
            message.metadata = metadata
        message.update_count += 1
        message.updated_at = time.monotonic()

    def _store_ephemeral(
        self,
        app: AppRecord,
        channel: str,
        user_id: str,
        text: str,
        blocks: list[JSONDict],
        thread_ts: str | None,
    ) -> JSONDict:
        ephemeral: JSONDict = {
            "channel": channel,
            "user": user_id,
            "text": text,
            "blocks": blocks,
            "thread_ts": thread_ts,
            "message_ts": self._next_ts(),
            "app_id": app.app_id,
            "posted_at": time.monotonic(),
        }
        self._ephemerals.setdefault(user_id, []).append(ephemeral)
        return ephemeral

    # ---- methods: each takes the call and returns the answer without ``ok`` ----------------------

    def _auth_test(self, ctx: ApiCall) -> JSONDict:
        app = ctx.app
        return {
            "url": f"https://{app.team_domain}.slack.com/",
            "team": app.team_name,
            "user": app.bot_name,
            "team_id": app.team_id,
            "user_id": app.bot_user_id,
            "bot_id": app.bot_id,
            "is_enterprise_install": False,
        }

    def _apps_connections_open(self, ctx: ApiCall) -> JSONDict:
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = (ctx.app.app_id, ctx.token)
        query = urlencode({"ticket": ticket, "app_id": ctx.app.app_id})
        return {"url": f"ws://127.0.0.1:{self.port}/link/?{query}"}

    def _chat_post_message(self, ctx: ApiCall) -> JSONDict:
        params = ctx.params
        channel = self._resolve_channel(params.get("channel"))
        text = check_text(params) or ""
        blocks = check_blocks(params.get("blocks"), MAX_MESSAGE_BLOCKS)
        if not text and not blocks and not params.get("attachments"):
            raise ApiError("no_text")
        metadata = self._metadata(params)
        self._check_membership(channel)
        self._pace(channel)
        thread_ts = params.get("thread_ts") or None
        message = self._store_message(ctx.app, channel, text, blocks, metadata, thread_ts)
        return {"channel": channel, "ts": message.ts, "message": message.to_dict()}

    def _owned_message(self, ctx: ApiCall) -> Message:
        channel = ctx.params.get("channel")
        if not isinstance(channel, str) or channel in self._removed_channels:
            raise ApiError("channel_not_found")
        if channel[:1] in {"U", "W"}:
            channel = self.dm_channel_id(channel)
        message = self._messages_by_key.get((channel, str(ctx.params.get("ts"))))
        if message is None or message.deleted:
            raise ApiError("message_not_found")
        if message.app_id != ctx.app.app_id:
            raise ApiError("cant_update_message")
        return message

    def _chat_update(self, ctx: ApiCall) -> JSONDict:
        message = self._owned_message(ctx)
        text = check_text(ctx.params)
        blocks = None
        if "blocks" in ctx.params:
            blocks = check_blocks(ctx.params["blocks"], MAX_MESSAGE_BLOCKS)
        if text is None and blocks is None and "attachments" not in ctx.params:
            raise ApiError("no_text")
        self._update_message(message, text, blocks, self._metadata(ctx.params))
        return {
            "channel": message.channel,
            "ts": message.ts,
            "text": message.text,
            "message": message.to_dict(),
        }

    def _chat_delete(self, ctx: ApiCall) -> JSONDict:
        message = self._owned_message(ctx)
        message.deleted = True
        return {"channel": message.channel, "ts": message.ts}

    def _chat_post_ephemeral(self, ctx: ApiCall) -> JSONDict:
        params = ctx.params
        channel = self._resolve_channel(params.get("channel"))
        user_id = params.get("user")
        if not isinstance(user_id, str) or not user_id:
            raise ApiError("user_not_in_channel")
        text = check_text(params) or ""
        blocks = check_blocks(params.get("blocks"), MAX_MESSAGE_BLOCKS)
        if not text and not blocks and not params.get("attachments"):
            raise ApiError("no_text")
        self._check_membership(channel)
        thread_ts = params.get("thread_ts") or None
        ephemeral = self._store_ephemeral(ctx.app, channel, user_id, text, blocks, thread_ts)
        return {"message_ts": ephemeral["message_ts"]}

    def _conversations_open(self, ctx: ApiCall) -> JSONDict:
        users = ctx.params.get("users")
        if isinstance(users, list):
            users = ",".join(str(user) for user in users)
        if not isinstance(users, str) or not users.strip():
            raise ApiError("users_list_not_supplied")
        ids = [user.strip() for user in users.split(",") if user.strip()]
        if len(ids) == 1:
            channel = self.dm_channel_id(ids[0])
            already_open = channel in self._dm_users
            self._dm_users[channel] = ids[0]
            return {"no_op": already_open, "already_open": already_open, "channel": {"id": channel}}
        channel = "G" + auto_id(sorted(ids)).upper()
        return {"channel": {"id": channel}}

    def _conversations_info(self, ctx: ApiCall) -> JSONDict:
        channel = self._resolve_channel(ctx.params.get("channel"))
        info: JSONDict = {
            "id": channel,
            "name": self._channel_name(channel),
            "is_channel": channel.startswith("C"),
            "is_group": channel.startswith("G"),
            "is_im": channel.startswith("D"),
            "is_private": not channel.startswith("C"),
        }
        if channel in self._dm_users:
            info["user"] = self._dm_users[channel]
        return {"channel": info}

    def _conversations_history(self, ctx: ApiCall) -> JSONDict:
        """Newest first, ``oldest``/``latest`` exclusive bounds, pages of ``limit`` by cursor."""
        params = ctx.params
        channel = self._resolve_channel(params.get("channel"))
        self._check_membership(channel)
        # The scope depends on the kind of conversation, so it is checked here.
        self._check_scope_named(
            "groups:history" if channel.startswith("G") else "channels:history", ctx.token
        )
        oldest = float(params.get("oldest") or 0)
        latest = float(params.get("latest") or "inf")
        limit = min(int(params.get("limit") or 100), 999)
        start = int(params.get("cursor") or 0)
        with_metadata = str(params.get("include_all_metadata")).lower() in {"1", "true"}
        messages = [
            message
            for message in reversed(self._messages)
            if message.channel == channel
            and not message.deleted
            and message.thread_ts in (None, message.ts)
            and oldest < float(message.ts) < latest
        ]
        page = messages[start : start + limit]
        answers = []
        for message in page:
            answer = message.to_dict()
            if not with_metadata:
                answer.pop("metadata", None)
            answers.append(answer)
        more = start + limit < len(messages)
        return {
            "messages": answers,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _user_answer(self, user: UserRecord) -> JSONDict:
        return {
            "user": {
                "id": user.user_id,
                "team_id": user.team_id,
                "name": user.name,
                "deleted": False,
                "real_name": user.real_name,
                "profile": {
                    "email": user.email,
                    "real_name": user.real_name,
                    "display_name": user.name,
                },
                "is_bot": False,
                "is_app_user": False,
            }
        }

    def _users_info(self, ctx: ApiCall) -> JSONDict:
        user = self._users.get(str(ctx.params.get("user")))
        if user is None:
            raise ApiError("user_not_found")
        return self._user_answer(user)

    def _users_lookup_by_email(self, ctx: ApiCall) -> JSONDict:
        email = str(ctx.params.get("email", "")).lower()
        for user in self._users.values():
            if user.email.lower() == email:
                return self._user_answer(user)
        raise ApiError("users_not_found")
