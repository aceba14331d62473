"""Every table of the service, imported once so the metadata is complete."""

from sqlmodel import SQLModel

from models.audit.schema import AuditEvent
from models.chat.channel_health import ChatChannelHealth
from models.chat.links import ChatLinkCode
from models.chat.messages import ChatDeliveryClaim, ChatMessage
from models.chat.pace import ChatPace
from models.chat.pending_lists import ChatPendingList
from models.connections.schema import Connection
from models.core.deployment_secrets import DeploymentSecret
from models.core.throttle import ThrottleCounter
from models.delivery.outbox import OutboxEvent
from models.plugins.schema import Plugin, PluginConnection
from models.reviews.schema import Review, ReviewDecisionRecord, ReviewGroup
from models.rules.schema import AccessRequestRule
from models.sessions.schema import GatewaySession
from models.sidecars.schema import Sidecar
from models.sign_in.browser_sessions import BrowserSession
from models.users.schema import Organization, User
from models.webhooks.schema import WebhookDelivery, WebhookEndpoint, WebhookEvent

metadata = SQLModel.metadata

__all__ = [
    "AccessRequestRule",
    "AuditEvent",
    "BrowserSession",
    "ChatChannelHealth",
    "ChatDeliveryClaim",
    "ChatLinkCode",
    "ChatMessage",
    "ChatPace",
    "ChatPendingList",
    "Connection",
    "DeploymentSecret",
    "GatewaySession",
    "Organization",
    "OutboxEvent",
    "Plugin",
    "PluginConnection",
    "Review",
    "ReviewDecisionRecord",
    "ReviewGroup",
    "Sidecar",
    "ThrottleCounter",
    "User",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
    "metadata",
]
