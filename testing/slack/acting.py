"""People acting in the loopback Slack workspace, as Slack delivers their acts to the app."""

from __future__ import annotations

import copy
import json
import secrets
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, Unpack
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from testing.slack.blocks import action_id_of, buttons_with_blocks, check_blocks, check_text
from testing.slack.records import (
    MAX_MESSAGE_BLOCKS,
    RESPONSE_URL_USES,
    Ack,
    ApiError,
    AppRecord,
    AppRoute,
    Delivery,
    Message,
    ResponseTarget,
    T,
    Trigger,
    Via,
    new_id,
    truthy,
)
from testing.slack.socket_mode import SocketMode
from testing.slack.views import view_state_of

JSONDict = dict[str, Any]


class ActingUsers(SocketMode):
    """Tests act as people: clicks, view submissions, slash commands, App Home, response URLs.

    Acting methods have a ``submit_*`` twin returning a :class:`concurrent.futures.Future`.
    """

    def _routed(self, delivery: Delivery) -> tuple[AppRecord, AppRoute]:
        app = self._pick_app(delivery.get("app_token"), delivery.get("team_id"))
        route = self._route(
            app,
            delivery.get("via", "socket"),
            delivery.get("http_url"),
            delivery.get("signing_secret"),
            delivery.get("timestamp"),
            delivery.get("signature"),
        )
        return app, route

    def _pick_app(self, app_token: str | None, team_id: str | None) -> AppRecord:
        if app_token is not None:
            return self._app_for_token(app_token)
        for app in self._apps.values():
            if team_id is None or app.team_id == team_id:
                return app
        raise LookupError(f"no app in team {team_id}" if team_id else "no app: call add_app()")

    def _route(
        self,
        app: AppRecord,
        via: Via,
        http_url: str | None,
        signing_secret: str | None,
        timestamp: str | int | None,
        signature: str | None,
    ) -> AppRoute:
        if via not in ("socket", "http"):
            raise ValueError(f"via must be 'socket' or 'http', not {via!r}")
        url = http_url or app.request_url
        if via == "http" and not url:
            raise ValueError("via='http' needs http_url= (or add_app(request_url=...))")
        return AppRoute(via, url, signing_secret or app.signing_secret, timestamp, signature)

    def _issue_trigger(self, app: AppRecord, user_id: str) -> str:
        trigger_id = f"{int(time.time())}.{secrets.randbelow(10**10)}.{secrets.token_hex(16)}"
        self._triggers[trigger_id] = Trigger(user_id, app.app_id, time.monotonic())
        return trigger_id

    def _issue_response_url(
        self, app: AppRecord, user_id: str, channel_id: str, ts: str | None, ephemeral: bool
    ) -> str:
        response_id = secrets.token_hex(12)
        self._response_targets[response_id] = ResponseTarget(
            app.app_id, user_id, channel_id, ts, ephemeral, time.monotonic()
        )
        return f"{self.url}/response/{response_id}"

    def _block_actions_payload(
        self, app: AppRecord, user_id: str, target: Any, action_id: str, value: str | None
    ) -> tuple[JSONDict, str | None]:
        """The payload of a button click on ``target`` and the id of the view clicked, if any."""
        payload: JSONDict = {
            "type": "block_actions",
            "user": self._user_object(app, user_id),
            "api_app_id": app.app_id,
            "token": app.verification_token,
        }
        view_id: str | None = None
        if isinstance(target, Message):
            stored = self._messages_by_key.get((target.channel, target.ts))
            if stored is None or stored.deleted:
                raise LookupError(f"message {target.ts} in {target.channel} no longer exists")
            blocks = stored.blocks
            container: JSONDict = {
                "type": "message",
                "message_ts": stored.ts,
                "channel_id": stored.channel,
                "is_ephemeral": False,
            }
            channel_id, message_ts, ephemeral = stored.channel, stored.ts, False
        elif isinstance(target, dict) and "message_ts" in target:
            channel_id, message_ts, ephemeral = str(target["channel"]), target["message_ts"], True
            stored_ephemeral = next(
                (
                    e
                    for e in self._ephemerals.get(str(target.get("user")), [])
                    if e["message_ts"] == message_ts
                ),
                target,
            )
            blocks = stored_ephemeral.get("blocks") or []
            container = {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel_id,
                "is_ephemeral": True,
            }
        elif isinstance(target, dict) and str(target.get("id", "")).startswith("V"):
            record = self._views.get(str(target["id"]))
            view = record.view if record is not None else target
            if record is not None and not record.is_open and view.get("type") == "modal":
                raise LookupError(f"view {target['id']} is closed")
            view_id = str(view["id"])
            blocks = view.get("blocks") or []
            container = {"type": "view", "view_id": view_id}
            channel_id, message_ts, ephemeral = "", None, False
        else:
            raise TypeError(f"cannot click on {type(target).__name__}: pass a Message or view")
        block_id, element = self._find_button(blocks, action_id, value)
        payload["container"] = container
        payload["trigger_id"] = self._issue_trigger(app, user_id)
        payload["team"] = self._team_object(app)
        payload["enterprise"] = None
        payload["is_enterprise_install"] = False
        if channel_id:
            payload["channel"] = {"id": channel_id, "name": self._channel_name(channel_id)}
        if isinstance(target, Message):
            payload["message"] = self._messages_by_key[(channel_id, str(message_ts))].to_dict()
        if view_id is not None:
            view = copy.deepcopy(self._views[view_id].view) if view_id in self._views else target
            payload["view"] = view
        payload["state"] = {"values": {}}
        if channel_id:
            payload["response_url"] = self._issue_response_url(
                app, user_id, channel_id, message_ts, ephemeral
            )
        action: JSONDict = {
            "action_id": action_id_of(element),
            "block_id": block_id,
            "text": copy.deepcopy(element.get("text")),
            "type": "button",
            "action_ts": f"{time.time():.6f}",
        }
        for key in ("value", "style"):
            if element.get(key) is not None:
                action[key] = element[key]
        payload["actions"] = [action]
        return payload, view_id

    @staticmethod
    def _find_button(
        blocks: list[JSONDict], action_id: str, value: str | None
    ) -> tuple[str, JSONDict]:
        found = list(buttons_with_blocks(blocks))
        for block_id, element in found:
            if action_id_of(element) == action_id and (
                value is None or element.get("value") == value
            ):
                return block_id, element
        wanted = f"action_id={action_id!r}" + ("" if value is None else f" value={value!r}")
        offered = [(action_id_of(e), e.get("value")) for _, e in found]
        raise LookupError(f"no button with {wanted} on this card; buttons: {offered}")

    def click(
        self,
        user_id: str,
        message: Any,
        action_id: str,
        *,
        value: str | None = None,
        **delivery: Unpack[Delivery],
    ) -> Ack:
        """Click a button (found by action_id, and value if given) on a message, an ephemeral
        message (a dict from ``ephemerals()``) or a view; LookupError if there is none."""
        return self._wait(
            self.submit_click(
                user_id,
                message,
                action_id,
                value=value,
                **delivery,
            )
        )

    def submit_click(
        self,
        user_id: str,
        message: Any,
        action_id: str,
        *,
        value: str | None = None,
        **delivery: Unpack[Delivery],
    ) -> Future[Ack]:
        with self._cond:
            app, route = self._routed(delivery)
            payload, _ = self._block_actions_payload(app, user_id, message, action_id, value)
        return self._submit(self._deliver(app, "interactive", payload, route, False))

    def submit_view(
        self,
        user_id: str,
        view_id_or_view: str | JSONDict,
        values: dict[str, dict[str, Any]] | None = None,
        **delivery: Unpack[Delivery],
    ) -> Ack:
        """Submit a modal with ``values`` = ``{block_id: {action_id: value}}``.

        The app's response_action is applied to the open views: none closes the modal, "errors"
        keeps it, "update" replaces it, "push" stacks a new one, "clear" closes them all.
        """
        return self._wait(
            self.submit_view_async(
                user_id,
                view_id_or_view,
                values,
                **delivery,
            )
        )

    def submit_view_async(
        self,
        user_id: str,
        view_id_or_view: str | JSONDict,
        values: dict[str, dict[str, Any]] | None = None,
        **delivery: Unpack[Delivery],
    ) -> Future[Ack]:
        with self._cond:
            app, route = self._routed(delivery)
            if isinstance(view_id_or_view, str):
                view_id = view_id_or_view
            else:
                view_id = str(view_id_or_view.get("id", ""))
            record = self._views.get(view_id)
            if record is None and isinstance(view_id_or_view, str):
                raise LookupError(f"no view {view_id}")
            if record is not None and not record.is_open:
                raise LookupError(f"view {view_id} is not open any more")
            view = copy.deepcopy(record.view if record else view_id_or_view)
            assert isinstance(view, dict)
            view["state"] = {"values": view_state_of(view, values or {})}
            payload: JSONDict = {
                "type": "view_submission",
                "team": self._team_object(app),
                "user": self._user_object(app, user_id),
                "api_app_id": app.app_id,
                "token": app.verification_token,
                "trigger_id": self._issue_trigger(app, user_id),
                "view": view,
                "response_urls": [],
                "is_enterprise_install": False,
                "enterprise": None,
            }

        def after(ack: Ack) -> None:
            if record is not None:
                self._apply_response_action(app, record, ack)

        return self._submit(self._deliver(app, "interactive", payload, route, True, after))

    def slash_command(
        self,
        user_id: str,
        text: str,
        *,
        channel_id: str = "C0GENERAL",
        command: str = "/accessgate",
        **delivery: Unpack[Delivery],
    ) -> Ack:
        """Run ``{command} {text}`` in ``channel_id``; the ack's payload is the app's reply."""
        return self._wait(
            self.submit_slash_command(
                user_id,
                text,
                channel_id=channel_id,
                command=command,
                **delivery,
            )
        )

    def submit_slash_command(
        self,
        user_id: str,
        text: str,
        *,
        channel_id: str = "C0GENERAL",
        command: str = "/accessgate",
        **delivery: Unpack[Delivery],
    ) -> Future[Ack]:
        with self._cond:
            app, route = self._routed(delivery)
            user = self._user_object(app, user_id)
            payload: JSONDict = {
                "token": app.verification_token,
                "team_id": app.team_id,
                "team_domain": app.team_domain,
                "channel_id": channel_id,
                "channel_name": self._channel_name(channel_id),
                "user_id": user_id,
                "user_name": user["name"],
                "command": command,
                "text": text,
                "api_app_id": app.app_id,
                "is_enterprise_install": "false",
                "response_url": self._issue_response_url(app, user_id, channel_id, None, False),
                "trigger_id": self._issue_trigger(app, user_id),
            }
        return self._submit(self._deliver(app, "slash_commands", payload, route, True))

    def open_app_home(
        self,
        user_id: str,
        **delivery: Unpack[Delivery],
    ) -> Ack:
        """The user opens the app's Home tab (an ``app_home_opened`` event)."""
        return self._wait(
            self.submit_open_app_home(
                user_id,
                **delivery,
            )
        )

    def submit_open_app_home(
        self,
        user_id: str,
        **delivery: Unpack[Delivery],
    ) -> Future[Ack]:
        with self._cond:
            app, route = self._routed(delivery)
            channel = self.dm_channel_id(user_id)
            self._dm_users[channel] = user_id
            now = time.time()
            event: JSONDict = {
                "type": "app_home_opened",
                "user": user_id,
                "channel": channel,
                "tab": "home",
                "event_ts": f"{now:.6f}",
            }
            home_id = self._home_views.get((user_id, app.app_id))
            if home_id is not None:
                event["view"] = copy.deepcopy(self._views[home_id].view)
            payload: JSONDict = {
                "token": app.verification_token,
                "team_id": app.team_id,
                "api_app_id": app.app_id,
                "event": event,
                "type": "event_callback",
                "event_id": new_id("Ev", 10),
                "event_time": int(now),
                "authorizations": [
                    {
                        "enterprise_id": None,
                        "team_id": app.team_id,
                        "user_id": app.bot_user_id,
                        "is_bot": True,
                        "is_enterprise_install": False,
                    }
                ],
                "is_ext_shared_channel": False,
            }
        return self._submit(self._deliver(app, "events_api", payload, route, False))

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        try:
            background = self._running
        except RuntimeError:
            coro.close()
            raise
        return background.loop_thread.submit(coro)

    def _wait(self, future: Future[T]) -> T:
        if self._background and threading.current_thread() is self._background.loop_thread.thread:
            future.cancel()
            raise RuntimeError("use the submit_* methods from the server's own loop")
        return future.result(timeout=self.connect_timeout + self.ack_timeout + 10)

    # ---- response URLs ---------------------------------------------------------------------------

    async def _response_endpoint(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        raw = await request.body()
        content_type = request.headers.get("content-type", "")
        try:
            if "application/x-www-form-urlencoded" in content_type:
                form = dict(parse_qsl(raw.decode(), keep_blank_values=True))
                body = json.loads(form.get("payload", "{}"))
            else:
                body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError(body)
        except ValueError:
            return PlainTextResponse("invalid_payload", status_code=400)
        with self._cond:
            target = self._response_targets.get(response_id)
            record: JSONDict = {
                "url": str(request.url),
                "body": body,
                "user_id": target.user_id if target else None,
                "channel_id": target.channel_id if target else None,
                "message_ts": target.message_ts if target else None,
                "time": time.monotonic(),
            }
            status, answer = 200, "ok"
            if target is None or not self._response_url_usable(target):
                status, answer = 404, "expired_url"
            else:
                target.uses += 1
                try:
                    self._apply_response(target, body)
                except ApiError as error:
                    status, answer = 400, error.error
            record["status"] = status
            self._responses.append(record)
            self._cond.notify_all()
        if status != 200:
            return PlainTextResponse(answer, status_code=status)
        return JSONResponse({"ok": True})

    def _response_url_usable(self, target: ResponseTarget) -> bool:
        age = time.monotonic() - target.issued_at
        return target.uses < RESPONSE_URL_USES and age < self.response_url_ttl

    def _apply_response(self, target: ResponseTarget, body: JSONDict) -> None:
        app = self._apps[target.app_id]
        text = check_text(body) or ""
        blocks = check_blocks(body.get("blocks"), MAX_MESSAGE_BLOCKS)
        if truthy(body.get("delete_original")):
            if target.is_ephemeral:
                self._ephemerals[target.user_id] = [
                    e
                    for e in self._ephemerals.get(target.user_id, [])
                    if e["message_ts"] != target.message_ts
                ]
            elif target.message_ts is not None:
                found = self._messages_by_key.get((target.channel_id, target.message_ts))
                if found is not None:
                    found.deleted = True
            return
        if truthy(body.get("replace_original")) and target.message_ts is not None:
            if target.is_ephemeral:
                for ephemeral in self._ephemerals.get(target.user_id, []):
                    if ephemeral["message_ts"] == target.message_ts:
                        ephemeral.update(text=text, blocks=blocks)
                return
            found = self._messages_by_key.get((target.channel_id, target.message_ts))
            if found is not None and not found.deleted:
                self._update_message(found, text, blocks, None)
            return
        # A URL that did not come from a message (a slash command's) owns what it posts first:
        # Slack's replace_original through it replaces that message.
        if body.get("response_type") == "in_channel":
            message = self._store_message(
                app, target.channel_id, text, blocks, None, body.get("thread_ts") or None
            )
            posted_ts, posted_ephemeral = message.ts, False
        else:
            stored = self._store_ephemeral(
                app, target.channel_id, target.user_id, text, blocks, None
            )
            posted_ts, posted_ephemeral = stored["message_ts"], True
        if target.message_ts is None:
            target.message_ts, target.is_ephemeral = posted_ts, posted_ephemeral
