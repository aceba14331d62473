"""The loopback Slack's Socket Mode, driven by a raw WebSocket and by the real slack_bolt app."""

import json
import uuid

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from testing.slack import (
    buttons,
    text_of,
)
from tests.testing.slack.support import ADA, APP, plain, review_card

# ---- Socket Mode ----------------------------------------------------------------------------


def test_socket_mode_protocol_on_a_raw_websocket(slack, web):
    url = web.apps_connections_open(app_token=APP)["url"]
    assert url.startswith(f"ws://127.0.0.1:{slack.port}/link/?ticket=")
    assert url.endswith("&app_id=A0001")
    posted = web.chat_postMessage(channel="C1", text="review", blocks=review_card())
    message = slack.message("C1", posted["ts"])

    with connect(url, open_timeout=5) as websocket:
        hello = json.loads(websocket.recv(timeout=5))
        assert hello == {
            "type": "hello",
            "num_connections": 1,
            "debug_info": {"host": "local", "approximate_connection_time": 18060},
            "connection_info": {"app_id": "A0001"},
        }
        assert slack.socket_connections(APP) == 1

        future = slack.submit_click(ADA, message, "reject")
        envelope = json.loads(websocket.recv(timeout=5))
        assert envelope["type"] == "interactive"
        assert uuid.UUID(envelope["envelope_id"])
        assert envelope["accepts_response_payload"] is False
        assert (envelope["retry_attempt"], envelope["retry_reason"]) == (0, "")
        payload = envelope["payload"]
        assert payload["type"] == "block_actions"
        assert payload["user"] == {"id": ADA, "username": "ada", "name": "ada", "team_id": "T0001"}
        assert payload["api_app_id"] == "A0001"
        assert payload["container"] == {
            "type": "message",
            "message_ts": posted["ts"],
            "channel_id": "C1",
            "is_ephemeral": False,
        }
        assert payload["team"] == {"id": "T0001", "domain": "acme"}
        assert payload["enterprise"] is None
        assert payload["is_enterprise_install"] is False
        assert payload["channel"]["id"] == "C1"
        assert payload["message"]["blocks"] == review_card()
        assert payload["message"]["ts"] == posted["ts"]
        assert payload["state"] == {"values": {}}
        assert payload["response_url"].startswith(f"http://127.0.0.1:{slack.port}/response/")
        assert payload["trigger_id"]
        (action,) = payload["actions"]
        assert action["action_id"] == "reject"
        assert action["block_id"] == "decision"
        assert (action["value"], action["style"], action["type"]) == ("42", "danger", "button")
        assert action["text"] == plain("Reject")

        websocket.send(json.dumps({"envelope_id": envelope["envelope_id"], "payload": {"x": 1}}))
        ack = future.result(timeout=5)
        assert ack.envelope_id == envelope["envelope_id"]
        assert ack.payload == {"x": 1}
        assert ack.status == 200
        assert ack.elapsed < 3

        slack.ack_timeout = 0.2
        with pytest.raises(TimeoutError, match="did not acknowledge"):
            slack.click(ADA, message, "approve")

    slack.wait_for(lambda: slack.socket_connections(APP) == 0, timeout=5)
    with pytest.raises(InvalidStatus):
        connect(url, open_timeout=5)  # a ticket is single use


def test_bolt_app_over_socket_mode_handles_clicks_modals_commands_and_home(slack, web, bolt):
    posted = web.chat_postMessage(channel="C1", text="review", blocks=review_card())
    message = slack.message("C1", posted["ts"])

    ack = slack.click(ADA, message, "open_form")
    assert ack.elapsed < 3
    slack.wait_for(lambda: slack.open_views(ADA), timeout=5, message="the modal opens")
    (modal,) = slack.open_views(ADA)
    assert modal["callback_id"] == "request_form"
    # The server holds the view before views.open's answer reaches the app.
    slack.wait_for(lambda: "opened" in dict(bolt.seen), timeout=5, message="the app saw it open")
    opened = dict(bolt.seen)["opened"]
    assert opened["view"]["id"] == modal["id"]

    refused = slack.submit_view(ADA, modal["id"], {"duration": {"duration": "8h"}})
    assert refused.payload == {
        "response_action": "errors",
        "errors": {"reason": "Say why you need it"},
    }
    assert [view["id"] for view in slack.open_views(ADA)] == [modal["id"]]
    state = dict(bolt.seen)["view"]["view"]["state"]["values"]
    assert state == {
        "reason": {"reason": {"type": "plain_text_input", "value": None}},
        "until": {"until": {"type": "timepicker", "selected_time": "17:00"}},
        "duration": {
            "duration": {
                "type": "static_select",
                "selected_option": {"text": plain("A day"), "value": "8h"},
            }
        },
    }
    with pytest.raises(LookupError, match="no block"):
        slack.submit_view(ADA, modal["id"], {"nope": {"nope": "x"}})

    accepted = slack.submit_view(
        ADA, modal["id"], {"reason": {"reason": "on call"}, "until": {"until": "09:30"}}
    )
    assert accepted.payload is None
    assert slack.open_views(ADA) == []
    submitted = [body for kind, body in bolt.seen if kind == "view"][-1]
    assert submitted["view"]["private_metadata"] == "42"
    assert submitted["view"]["state"]["values"]["until"]["until"]["selected_time"] == "09:30"

    command = slack.slash_command(ADA, "status 42")
    assert command.payload == {"text": "Looking up status 42"}
    command_body = dict(bolt.seen)["command"]
    assert (command_body["command"], command_body["text"]) == ("/accessgate", "status 42")
    assert command_body["channel_id"] == "C0GENERAL"

    slack.open_app_home(ADA)
    slack.wait_for(lambda: slack.home_view(ADA) is not None, timeout=5)
    assert text_of(slack.home_view(ADA)) == "Your requests"

    approved = slack.click(ADA, message, "approve", value="42")
    assert approved.payload is None
    slack.wait_for(lambda: slack.message("C1", posted["ts"]).update_count == 1, timeout=5)
    updated = slack.message("C1", posted["ts"])
    assert updated.text == "Approved"
    assert buttons(updated) == []
    (response,) = slack.responses
    assert response["body"]["replace_original"] is True
    assert response["status"] == 200
    with pytest.raises(LookupError):
        slack.click(ADA, updated, "approve")


def test_many_clicks_at_once_and_a_refresh(slack, web, bolt):
    posted = web.chat_postMessage(channel="C1", text="review", blocks=review_card())
    message = slack.message("C1", posted["ts"])
    futures = [slack.submit_click(f"U{n:03d}", message, "reject") for n in range(50)]
    acks = [future.result(timeout=10) for future in futures]
    assert len({ack.envelope_id for ack in acks}) == 50
    assert max(ack.elapsed for ack in acks) < 3

    slack.disconnect_all(APP)
    slack.wait_for(
        lambda: (
            len(slack.calls_to("apps.connections.open")) == 2 and slack.socket_connections(APP) == 1
        ),
        timeout=5,
        message="the app reconnects",
    )
    assert slack.click(ADA, message, "reject").status == 200
    slack.add_app(app_token="xapp-1-A0001-rotated")
    assert slack.socket_connections("xapp-1-A0001-rotated") == 1  # same app, same connection


def test_a_response_url_works_five_times_within_thirty_minutes(slack, web, bolt):
    posted = web.chat_postMessage(channel="C1", text="review", blocks=review_card())
    slack.click(ADA, slack.message("C1", posted["ts"]), "reject")
    slack.wait_for(lambda: len(bolt.seen) == 1, message="the app saw the click")
    response_url = bolt.seen[-1][1]["response_url"]

    statuses = [
        httpx.post(response_url, json={"text": f"answer {n}"}).status_code for n in range(6)
    ]
    assert statuses == [200, 200, 200, 200, 200, 404]
    assert [e["text"] for e in slack.ephemerals(ADA)] == [f"answer {n}" for n in range(5)]

    slack.click(ADA, slack.message("C1", posted["ts"]), "reject")
    slack.wait_for(lambda: len(bolt.seen) == 2, message="the app saw the second click")
    fresh = bolt.seen[-1][1]["response_url"]
    slack.response_url_ttl = 0
    expired = httpx.post(fresh, json={"text": "too late"})
    assert (expired.status_code, expired.text) == (404, "expired_url")
