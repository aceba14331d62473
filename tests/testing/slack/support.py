"""What the loopback Slack's own tests share: tokens, a review card, a Bolt app to drive."""

from dataclasses import dataclass, field
from typing import Any

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

BOT = "xoxb-0001-test"


APP = "xapp-1-A0001-test"


SIGNING_SECRET = "test-signing-secret"


ADA = "U100"


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def review_card(request_id: str = "42") -> list[dict[str, Any]]:
    return [
        {"type": "header", "text": plain("Access request")},
        {
            "type": "section",
            "block_id": "summary",
            "text": {"type": "mrkdwn", "text": "*ada* asks for *db-prod*"},
        },
        {
            "type": "actions",
            "block_id": "decision",
            "elements": [
                {
                    "type": "button",
                    "action_id": "approve",
                    "text": plain("Approve"),
                    "style": "primary",
                    "value": request_id,
                },
                {
                    "type": "button",
                    "action_id": "reject",
                    "text": plain("Reject"),
                    "style": "danger",
                    "value": request_id,
                    "confirm": {
                        "title": plain("Reject?"),
                        "text": plain("The request will be closed."),
                        "confirm": plain("Reject"),
                        "deny": plain("Cancel"),
                    },
                },
                {"type": "button", "action_id": "open_form", "text": plain("Ask for more")},
            ],
        },
    ]


REQUEST_FORM = {
    "type": "modal",
    "callback_id": "request_form",
    "private_metadata": "42",
    "title": plain("Request access"),
    "submit": plain("Send"),
    "close": plain("Cancel"),
    "blocks": [
        {
            "type": "input",
            "block_id": "reason",
            "label": plain("Why?"),
            "element": {"type": "plain_text_input", "action_id": "reason"},
        },
        {
            "type": "input",
            "block_id": "until",
            "label": plain("Until"),
            "element": {"type": "timepicker", "action_id": "until", "initial_time": "17:00"},
        },
        {
            "type": "input",
            "block_id": "duration",
            "label": plain("For"),
            "element": {
                "type": "static_select",
                "action_id": "duration",
                "options": [
                    {"text": plain("One hour"), "value": "1h"},
                    {"text": plain("A day"), "value": "8h"},
                ],
            },
        },
    ],
}


@dataclass
class BoltApp:
    app: AsyncApp
    handler: AsyncSocketModeHandler
    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def seen_kinds(self) -> list[str]:
        return [kind for kind, _ in self.seen]


def build_bolt_app(client: AsyncWebClient, seen: list[tuple[str, dict[str, Any]]]) -> AsyncApp:
    app = AsyncApp(client=client, signing_secret=SIGNING_SECRET)

    @app.action("approve")
    async def approve(ack, body, respond):
        await ack()
        seen.append(("approve", body))
        await respond(
            replace_original=True,
            text="Approved",
            blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "Approved by ada"}}],
        )

    @app.action("reject")
    async def reject(ack, body):
        await ack()
        seen.append(("reject", body))

    @app.action("open_form")
    async def open_form(ack, body, client):
        await ack()
        opened = await client.views_open(trigger_id=body["trigger_id"], view=REQUEST_FORM)
        seen.append(("opened", opened.data))

    @app.view("request_form")
    async def submitted(ack, body, view):
        seen.append(("view", body))
        if not view["state"]["values"]["reason"]["reason"]["value"]:
            await ack(response_action="errors", errors={"reason": "Say why you need it"})
        else:
            await ack()

    @app.command("/accessgate")
    async def command(ack, body):
        seen.append(("command", body))
        await ack(text=f"Looking up {body['text']}")

    @app.event("app_home_opened")
    async def home(event, client):
        seen.append(("home", event))
        await client.views_publish(
            user_id=event["user"],
            view={"type": "home", "blocks": [{"type": "section", "text": plain("Your requests")}]},
        )

    return app
