"""A Slack workspace on loopback that speaks Slack's wire protocols (see ``server``).

Layers, each building on the one before: ``workspace`` (state and what tests read), ``views``
(modals, App Home), ``web_api`` (``POST /api/{method}``), ``socket_mode`` (reaching the app over
Socket Mode or signed HTTP), ``acting`` (people clicking, submitting, typing commands) and
``server`` (running it all on 127.0.0.1). ``records`` and ``blocks`` hold what they share.
"""

from testing.slack.background import BackgroundServer, LoopThread
from testing.slack.blocks import buttons, text_of
from testing.slack.records import Ack, Call, Delivery, Message
from testing.slack.server import SlackServer
from testing.slack.socket_mode import sign_request

__all__ = [
    "Ack",
    "BackgroundServer",
    "Call",
    "Delivery",
    "LoopThread",
    "Message",
    "SlackServer",
    "buttons",
    "sign_request",
    "text_of",
]
