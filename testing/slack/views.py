"""Views (modals, App Home): their state as Slack builds it, and the views.* methods."""

from __future__ import annotations

import copy
import re
import secrets
import time
from typing import Any

from testing.slack.blocks import action_id_of, block_id_of, check_view
from testing.slack.records import Ack, ApiCall, ApiError, AppRecord, Trigger, ViewRecord, new_id
from testing.slack.workspace import Workspace

JSONDict = dict[str, Any]


# --------------------------------------------------------------------------------------------
# View state

_VALUE_ELEMENTS = {"plain_text_input", "email_text_input", "url_text_input", "number_input"}
_SINGLE_VALUE_ELEMENTS = {
    "timepicker": ("selected_time", "initial_time"),
    "datepicker": ("selected_date", "initial_date"),
    "datetimepicker": ("selected_date_time", "initial_date_time"),
    "users_select": ("selected_user", "initial_user"),
    "conversations_select": ("selected_conversation", "initial_conversation"),
    "channels_select": ("selected_channel", "initial_channel"),
}
_MULTI_VALUE_ELEMENTS = {
    "multi_users_select": ("selected_users", "initial_users"),
    "multi_conversations_select": ("selected_conversations", "initial_conversations"),
    "multi_channels_select": ("selected_channels", "initial_channels"),
}
_SINGLE_OPTION_ELEMENTS = {"static_select", "external_select", "radio_buttons"}
_MULTI_OPTION_ELEMENTS = {"multi_static_select", "multi_external_select", "checkboxes"}


def options_of(element: JSONDict) -> list[JSONDict]:
    options = [o for o in element.get("options") or [] if isinstance(o, dict)]
    for group in element.get("option_groups") or []:
        options.extend(o for o in group.get("options") or [] if isinstance(o, dict))
    return options


def resolve_option(element: JSONDict, value: Any) -> JSONDict:
    if isinstance(value, dict):
        return copy.deepcopy(value)
    for option in options_of(element):
        if option.get("value") == value:
            return copy.deepcopy(option)
    if "external" in str(element.get("type")):
        return {"text": {"type": "plain_text", "text": str(value)}, "value": str(value)}
    offered = [option.get("value") for option in options_of(element)]
    raise LookupError(
        f"{element.get('type')} {action_id_of(element)!r} offers no option {value!r}; "
        f"options: {offered}"
    )


def element_state(element: JSONDict, value: Any, given: bool) -> JSONDict:
    element_type = str(element.get("type"))
    state: JSONDict = {"type": element_type}
    if element_type in _VALUE_ELEMENTS:
        initial = element.get("initial_value")
        state["value"] = (None if value is None else str(value)) if given else initial
    elif element_type in _SINGLE_VALUE_ELEMENTS:
        key, initial_key = _SINGLE_VALUE_ELEMENTS[element_type]
        if given and element_type == "timepicker" and not re.fullmatch(r"\d\d:\d\d", str(value)):
            raise ValueError(f"a timepicker value is 'HH:MM', not {value!r}")
        state[key] = value if given else element.get(initial_key)
    elif element_type in _MULTI_VALUE_ELEMENTS:
        key, initial_key = _MULTI_VALUE_ELEMENTS[element_type]
        state[key] = list(value) if given else list(element.get(initial_key) or [])
    elif element_type in _SINGLE_OPTION_ELEMENTS:
        if given:
            state["selected_option"] = None if value is None else resolve_option(element, value)
        else:
            state["selected_option"] = copy.deepcopy(element.get("initial_option"))
    elif element_type in _MULTI_OPTION_ELEMENTS:
        if given:
            values = [value] if isinstance(value, str | dict) else list(value)
            state["selected_options"] = [resolve_option(element, item) for item in values]
        else:
            state["selected_options"] = copy.deepcopy(element.get("initial_options") or [])
    elif element_type == "rich_text_input":
        if given and isinstance(value, str):
            value = {
                "type": "rich_text",
                "elements": [
                    {"type": "rich_text_section", "elements": [{"type": "text", "text": value}]}
                ],
            }
        state["rich_text_value"] = value if given else element.get("initial_value")
    else:
        state["value"] = value if given else None
    return state


def stateful_elements(block: JSONDict) -> list[JSONDict]:
    block_type = block.get("type")
    if block_type == "input":
        element = block.get("element")
        return [element] if isinstance(element, dict) else []
    if block_type == "actions":
        return [e for e in block.get("elements") or [] if isinstance(e, dict)]
    if block_type == "section" and isinstance(block.get("accessory"), dict):
        return [block["accessory"]]
    return []


def view_state_of(view: JSONDict, values: dict[str, dict[str, Any]]) -> JSONDict:
    """``state.values`` for a submission: every input, filled from ``values`` or its initial."""
    remaining = {block_id: dict(actions) for block_id, actions in values.items()}
    state: JSONDict = {}
    known: dict[str, list[str]] = {}
    for index, block in enumerate(view.get("blocks") or []):
        block_id = block_id_of(index, block)
        given_here = remaining.pop(block_id, {})
        for element in stateful_elements(block):
            if element.get("type") in {"button", "overflow", "image"}:
                continue
            action_id = action_id_of(element)
            known.setdefault(block_id, []).append(action_id)
            given = action_id in given_here
            if block.get("type") != "input" and not given:
                continue
            value = given_here.pop(action_id, None)
            state.setdefault(block_id, {})[action_id] = element_state(element, value, given)
        if given_here:
            raise LookupError(
                f"block {block_id!r} has no input {sorted(given_here)}; "
                f"it has {known.get(block_id, [])}"
            )
    if remaining:
        raise LookupError(f"the view has no block {sorted(remaining)}; inputs: {known}")
    return state


class Views(Workspace):
    """Modals and App Home: views.open/push/update/publish and a submission's response_action."""

    def _use_trigger(self, trigger_id: Any) -> Trigger:
        trigger = self._triggers.get(str(trigger_id))
        if trigger is None:
            raise ApiError("invalid_trigger_id")
        if trigger.used:
            raise ApiError("exchanged_trigger_id")
        if self.trigger_ttl is not None and time.monotonic() - trigger.issued_at > self.trigger_ttl:
            raise ApiError("expired_trigger_id")
        trigger.used = True
        return trigger

    def _new_view(
        self,
        app: AppRecord,
        view: JSONDict,
        view_id: str | None = None,
        previous: JSONDict | None = None,
    ) -> JSONDict:
        view_id = view_id or new_id("V", 10)
        return {
            "id": view_id,
            "team_id": app.team_id,
            "type": view.get("type"),
            "blocks": copy.deepcopy(view.get("blocks") or []),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": {}},
            "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
            "title": copy.deepcopy(view.get("title")),
            "clear_on_close": bool(view.get("clear_on_close", False)),
            "notify_on_close": bool(view.get("notify_on_close", False)),
            "close": copy.deepcopy(view.get("close")),
            "submit": copy.deepcopy(view.get("submit")),
            "previous_view_id": previous["id"] if previous else None,
            "root_view_id": previous["root_view_id"] if previous else view_id,
            "app_id": app.app_id,
            "external_id": view.get("external_id", ""),
            "app_installed_team_id": app.team_id,
            "bot_id": app.bot_id,
        }

    def _replace_view(self, record: ViewRecord, view: JSONDict) -> None:
        old = record.view
        app = self._apps[record.app_id]
        replacement = self._new_view(app, view, view_id=str(old["id"]))
        replacement["previous_view_id"] = old.get("previous_view_id")
        replacement["root_view_id"] = old.get("root_view_id")
        record.view = replacement

    def _views_open(self, ctx: ApiCall) -> JSONDict:
        view = check_view(ctx.params.get("view"), "modal")
        trigger = self._use_trigger(ctx.params.get("trigger_id"))
        stored = self._new_view(ctx.app, view)
        self._views[stored["id"]] = ViewRecord(stored, trigger.user_id, ctx.app.app_id)
        self._view_stacks[trigger.user_id] = [stored["id"]]
        return {"view": copy.deepcopy(stored)}

    def _views_push(self, ctx: ApiCall) -> JSONDict:
        view = check_view(ctx.params.get("view"), "modal")
        trigger = self._use_trigger(ctx.params.get("trigger_id"))
        stack = self._view_stacks.setdefault(trigger.user_id, [])
        if len(stack) >= 3:
            raise ApiError("push_limit_reached")
        previous = self._views[stack[-1]].view if stack else None
        stored = self._new_view(ctx.app, view, previous=previous)
        self._views[stored["id"]] = ViewRecord(stored, trigger.user_id, ctx.app.app_id)
        stack.append(stored["id"])
        return {"view": copy.deepcopy(stored)}

    def _views_update(self, ctx: ApiCall) -> JSONDict:
        view = check_view(ctx.params.get("view"))
        view_id = ctx.params.get("view_id")
        external_id = ctx.params.get("external_id")
        record = self._views.get(str(view_id)) if view_id else None
        if record is None and external_id:
            record = next(
                (r for r in self._views.values() if r.view.get("external_id") == external_id),
                None,
            )
        if record is None or not record.is_open or record.app_id != ctx.app.app_id:
            raise ApiError("not_found")
        expected_hash = ctx.params.get("hash")
        if expected_hash and expected_hash != record.view.get("hash"):
            raise ApiError("hash_conflict")
        self._replace_view(record, view)
        return {"view": copy.deepcopy(record.view)}

    def _views_publish(self, ctx: ApiCall) -> JSONDict:
        user_id = ctx.params.get("user_id")
        if not isinstance(user_id, str) or user_id[:1] not in {"U", "W"}:
            raise ApiError("invalid_arguments")
        view = check_view(ctx.params.get("view"), "home")
        key = (user_id, ctx.app.app_id)
        existing = self._views.get(self._home_views.get(key, ""))
        expected_hash = ctx.params.get("hash")
        if existing is not None:
            if expected_hash and expected_hash != existing.view.get("hash"):
                raise ApiError("hash_conflict")
            self._replace_view(existing, view)
            return {"view": copy.deepcopy(existing.view)}
        stored = self._new_view(ctx.app, view)
        self._views[stored["id"]] = ViewRecord(stored, user_id, ctx.app.app_id)
        self._home_views[key] = stored["id"]
        return {"view": copy.deepcopy(stored)}

    def _apply_response_action(self, app: AppRecord, record: ViewRecord, ack: Ack) -> None:
        if ack.status != 200 or not record.is_open:
            return
        payload = ack.payload or {}
        action = payload.get("response_action")
        stack = self._view_stacks.setdefault(record.user_id, [])
        view_id = str(record.view["id"])
        if action == "errors":
            return
        if action == "update" and isinstance(payload.get("view"), dict):
            self._replace_view(record, payload["view"])
        elif action == "push" and isinstance(payload.get("view"), dict):
            pushed = self._new_view(app, payload["view"], previous=record.view)
            self._views[pushed["id"]] = ViewRecord(pushed, record.user_id, app.app_id)
            stack.append(pushed["id"])
        elif action == "clear":
            for open_id in stack:
                self._views[open_id].is_open = False
            stack.clear()
        else:
            record.is_open = False
            if view_id in stack:
                stack.remove(view_id)
