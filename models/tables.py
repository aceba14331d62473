"""Every table of the service, imported once so the metadata is complete."""

from sqlmodel import SQLModel

from models.chat_delivery import ChatMessage
from models.chat_links import ChatLinkCode
from models.connections import Connection
from models.outbox import OutboxEvent
from models.plugins import Plugin, PluginConnection
from models.reviews import Review, ReviewDecisionRecord, ReviewGroup
from models.rules import AccessRequestRule
from models.sessions import GatewaySession
from models.sidecars import Sidecar
from models.sign_in import SignInAttempt
from models.users import Organization, User

metadata = SQLModel.metadata

__all__ = [
    "AccessRequestRule",
    "ChatLinkCode",
    "ChatMessage",
    "Connection",
    "GatewaySession",
    "Organization",
    "OutboxEvent",
    "Plugin",
    "PluginConnection",
    "Review",
    "ReviewDecisionRecord",
    "ReviewGroup",
    "Sidecar",
    "SignInAttempt",
    "User",
    "metadata",
]
