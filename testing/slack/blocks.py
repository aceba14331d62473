"""Block Kit as the loopback Slack reads it (buttons, text) and checks it (Slack's limits)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from typing import Any

from testing.slack.records import (
    MAX_ACTION_ID,
    MAX_ACTIONS_ELEMENTS,
    MAX_BLOCK_ID,
    MAX_BUTTON_TEXT,
    MAX_BUTTON_URL,
    MAX_BUTTON_VALUE,
    MAX_CALLBACK_ID,
    MAX_CONTEXT_ELEMENTS,
    MAX_HEADER_TEXT,
    MAX_PRIVATE_METADATA,
    MAX_SECTION_FIELD_TEXT,
    MAX_SECTION_FIELDS,
    MAX_SECTION_TEXT,
    MAX_TEXT_ARGUMENT,
    MAX_VIEW_BLOCKS,
    MAX_VIEW_TITLE,
    ApiError,
    Message,
)

JSONDict = dict[str, Any]


# --------------------------------------------------------------------------------------------
# Card helpers


def walk(node: Any) -> Iterator[JSONDict]:
    """Every dict inside ``node``, depth first, in document order."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def blocks_of(target: Any) -> list[JSONDict]:
    if isinstance(target, Message):
        return target.blocks
    if isinstance(target, list):
        return target
    if isinstance(target, dict):
        blocks = target.get("blocks")
        if isinstance(blocks, list):
            return blocks
        message = target.get("message")
        if isinstance(message, dict) and isinstance(message.get("blocks"), list):
            return list(message["blocks"])
    return []


def plain(text_object: Any) -> str:
    if isinstance(text_object, dict):
        text = text_object.get("text")
        return text if isinstance(text, str) else ""
    return text_object if isinstance(text_object, str) else ""


def auto_id(*parts: Any) -> str:
    """A stable id for a block or element that has none (Slack makes up a random one)."""
    digest = hashlib.sha1(json.dumps(parts, sort_keys=True).encode(), usedforsecurity=False)
    return digest.hexdigest()[:5]


def block_id_of(index: int, block: JSONDict) -> str:
    block_id = block.get("block_id")
    return block_id if isinstance(block_id, str) and block_id else auto_id(index, block)


def action_id_of(element: JSONDict) -> str:
    action_id = element.get("action_id")
    return action_id if isinstance(action_id, str) and action_id else auto_id(element)


def buttons_with_blocks(blocks: list[JSONDict]) -> Iterator[tuple[str, JSONDict]]:
    for index, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        for node in walk(block):
            if node is not block and node.get("type") == "button":
                yield block_id_of(index, block), node


def buttons(target: Any) -> list[JSONDict]:
    """Every button on a card (a Message, a message/view dict, or a list of blocks)."""
    return [
        {
            "action_id": action_id_of(element),
            "value": element.get("value"),
            "style": element.get("style"),
            "text": plain(element.get("text")),
            "confirm": element.get("confirm"),
            "url": element.get("url"),
            "block_id": block_id,
        }
        for block_id, element in buttons_with_blocks(blocks_of(target))
    ]


def text_of(target: Any) -> str:
    """The message text and every text inside its blocks, one per line, for assertions."""
    parts: list[str] = []
    if isinstance(target, Message):
        parts.append(target.text)
    elif isinstance(target, dict) and isinstance(target.get("text"), str):
        parts.append(target["text"])
    for node in walk(blocks_of(target)):
        text = node.get("text")
        if isinstance(text, str):
            parts.append(text)
    return "\n".join(part for part in parts if part)


# --------------------------------------------------------------------------------------------
# Block Kit checks


def check_text_length(obj: Any, limit: int, pointer: str, what: str, problems: list[str]) -> None:
    text = plain(obj)
    if len(text) > limit:
        problems.append(f"{what} must be less than {limit + 1} characters [json-pointer:{pointer}]")


def check_block(block: JSONDict, pointer: str, problems: list[str]) -> None:
    block_type = block.get("type")
    block_id = block.get("block_id")
    if isinstance(block_id, str) and len(block_id) > MAX_BLOCK_ID:
        problems.append(f"block_id must be at most {MAX_BLOCK_ID} characters [{pointer}/block_id]")
    if block_type == "section":
        check_text_length(
            block.get("text"), MAX_SECTION_TEXT, f"{pointer}/text/text", "section text", problems
        )
        fields = block.get("fields") or []
        if isinstance(fields, list):
            if len(fields) > MAX_SECTION_FIELDS:
                problems.append(
                    f"no more than {MAX_SECTION_FIELDS} items allowed "
                    f"[json-pointer:{pointer}/fields]"
                )
            for index, item in enumerate(fields):
                check_text_length(
                    item,
                    MAX_SECTION_FIELD_TEXT,
                    f"{pointer}/fields/{index}/text",
                    "section field",
                    problems,
                )
    elif block_type == "header":
        check_text_length(
            block.get("text"), MAX_HEADER_TEXT, f"{pointer}/text/text", "header text", problems
        )
    elif block_type == "actions":
        elements = block.get("elements") or []
        if isinstance(elements, list) and len(elements) > MAX_ACTIONS_ELEMENTS:
            problems.append(
                f"no more than {MAX_ACTIONS_ELEMENTS} items allowed "
                f"[json-pointer:{pointer}/elements]"
            )
    elif block_type == "context":
        elements = block.get("elements") or []
        if isinstance(elements, list) and len(elements) > MAX_CONTEXT_ELEMENTS:
            problems.append(
                f"no more than {MAX_CONTEXT_ELEMENTS} items allowed "
                f"[json-pointer:{pointer}/elements]"
            )
    for node in walk(block):
        if node is block or node.get("type") != "button":
            continue
        where = f"{pointer} button {node.get('action_id')!r}"
        check_text_length(node.get("text"), MAX_BUTTON_TEXT, where, "button text", problems)
        for key, limit in (
            ("value", MAX_BUTTON_VALUE),
            ("action_id", MAX_ACTION_ID),
            ("url", MAX_BUTTON_URL),
        ):
            value = node.get(key)
            if isinstance(value, str) and len(value) > limit:
                problems.append(f"button {key} must be at most {limit} characters [{where}]")


def check_blocks(raw: Any, limit: int) -> list[JSONDict]:
    """The blocks as a list, or ``invalid_blocks`` if Slack would refuse them."""
    if raw is None or raw == "":
        return []
    blocks = raw
    if isinstance(raw, str):
        try:
            blocks = json.loads(raw)
        except ValueError:
            raise ApiError(
                "invalid_blocks", messages=["[ERROR] blocks is not valid JSON"]
            ) from None
    if not isinstance(blocks, list) or not all(
        isinstance(block, dict) and isinstance(block.get("type"), str) for block in blocks
    ):
        raise ApiError(
            "invalid_blocks", messages=["[ERROR] blocks must be an array of block objects"]
        )
    problems: list[str] = []
    if len(blocks) > limit:
        problems.append(f"no more than {limit} items allowed [json-pointer:/blocks]")
    for index, block in enumerate(blocks):
        check_block(block, f"/blocks/{index}", problems)
    if problems:
        raise ApiError("invalid_blocks", messages=[f"[ERROR] {problem}" for problem in problems])
    return copy.deepcopy(blocks)


def check_text(params: JSONDict) -> str | None:
    """The ``text`` argument (None when absent), refused beyond Slack's 40,000 characters."""
    text = params.get("text")
    if text is None:
        return None
    text = str(text)
    if len(text) > MAX_TEXT_ARGUMENT:
        raise ApiError(
            "invalid_blocks",
            messages=[f"[ERROR] text must be at most {MAX_TEXT_ARGUMENT} characters"],
        )
    return text


def check_view(raw: Any, expected_type: str | None = None) -> JSONDict:
    view = raw
    if isinstance(raw, str):
        try:
            view = json.loads(raw)
        except ValueError:
            raise ApiError("invalid_arguments", messages=["[ERROR] view is not JSON"]) from None
    if not isinstance(view, dict):
        raise ApiError("invalid_arguments", messages=["[ERROR] missing required field: view"])
    view_type = view.get("type")
    if view_type not in {"modal", "home"} or (expected_type and view_type != expected_type):
        raise ApiError(
            "invalid_arguments",
            messages=[f"[ERROR] view type must be {expected_type or 'modal or home'}"],
        )
    blocks = check_blocks(view.get("blocks"), MAX_VIEW_BLOCKS)
    problems: list[str] = []
    if view_type == "modal":
        if not plain(view.get("title")):
            problems.append("missing required field: title [json-pointer:/view/title]")
        for key in ("title", "submit", "close"):
            if len(plain(view.get(key))) > MAX_VIEW_TITLE:
                problems.append(
                    f"must be less than {MAX_VIEW_TITLE + 1} characters "
                    f"[json-pointer:/view/{key}/text]"
                )
        if any(block.get("type") == "input" for block in blocks) and not view.get("submit"):
            problems.append("submit is required when an input block is within the blocks array")
    for key, limit in (
        ("private_metadata", MAX_PRIVATE_METADATA),
        ("callback_id", MAX_CALLBACK_ID),
        ("external_id", MAX_CALLBACK_ID),
    ):
        value = view.get(key)
        if isinstance(value, str) and len(value) > limit:
            problems.append(f"must be less than {limit + 1} characters [json-pointer:/view/{key}]")
    if problems:
        raise ApiError("invalid_arguments", messages=[f"[ERROR] {p}" for p in problems])
    view = copy.deepcopy(view)
    view["blocks"] = blocks
    return view
