"""Webhook events, endpoints and deliveries, and the shapes the API shows of them."""

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

import pydantic
from pydantic import BaseModel, field_validator
from sqlalchemy import JSON, Index, String, Text, text
from sqlmodel import Field, SQLModel

from models.core.db import UTCDateTime, new_id
from models.core.request_body import RequestBody

PAYLOAD_VERSION = 1
MAX_URL = 2048


class WebhookKind(StrEnum):
    REVIEW_CREATED = "review.created"
    REVIEW_APPROVED = "review.approved"
    REVIEW_REJECTED = "review.rejected"
    REVIEW_REVOKED = "review.revoked"
    REVIEW_EXPIRED = "review.expired"
    SESSION_EXECUTED = "session.executed"
    PLUGIN_CONFIG_CHANGED = "plugin.config_changed"
    SIDECAR_HANDSHAKE_REFUSED = "sidecar.handshake_refused"


class DeliveryStatus(StrEnum):
    PENDING = "pending"  # not delivered yet: due now, or waiting for its next attempt
    DELIVERED = "delivered"
    FAILED = "failed"  # every attempt failed; an admin may retry it


NOT_FANNED_OUT = text("fanned_out = false")
PENDING = text("status = 'pending'")


class WebhookEvent(SQLModel, table=True):
    """One event, written in the transaction of the act it tells of, whether or not anyone
    listens yet: endpoints registered later, or a plugin installed later, still get it."""

    __tablename__ = "webhook_event"
    __table_args__ = (
        Index(
            "ix_webhook_event_not_fanned_out",
            "id",
            sqlite_where=NOT_FANNED_OUT,
            postgresql_where=NOT_FANNED_OUT,
        ),
        Index("ix_webhook_event_created_at", "created_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    organization_id: uuid.UUID = Field(foreign_key="organization.id")
    kind: str = Field(sa_type=String(64))
    review_id: uuid.UUID | None = None  # deliveries of one review go out in order
    data: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(sa_type=UTCDateTime)
    fanned_out: bool = False


class WebhookEndpoint(SQLModel, table=True):
    __tablename__ = "webhook_endpoint"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    organization_id: uuid.UUID = Field(foreign_key="organization.id", index=True)
    url: str = Field(sa_type=String(MAX_URL))
    events: list[str] = Field(default_factory=list, sa_type=JSON)  # empty: every kind
    enabled: bool = True
    sealed_secret: str = Field(sa_type=Text)
    created_at: datetime = Field(sa_type=UTCDateTime)


class WebhookDelivery(SQLModel, table=True):
    """One event for one endpoint: the signed body as sent, and how sending it went."""

    __tablename__ = "webhook_delivery"
    __table_args__ = (
        Index(
            "ix_webhook_delivery_due",
            "next_attempt_at",
            sqlite_where=PENDING,
            postgresql_where=PENDING,
        ),
        Index("ix_webhook_delivery_order", "endpoint_id", "review_id", "id"),
        Index("ix_webhook_delivery_listing", "endpoint_id", "status", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    endpoint_id: uuid.UUID = Field(foreign_key="webhook_endpoint.id", ondelete="CASCADE")
    event_id: int
    message_id: str = Field(sa_type=String(64))  # webhook-id: the same on every attempt
    kind: str = Field(sa_type=String(64))
    review_id: uuid.UUID | None = None
    body: str = Field(sa_type=Text)
    event_at: datetime = Field(sa_type=UTCDateTime)
    status: str = Field(default=DeliveryStatus.PENDING, sa_type=String(16))
    attempts: int = 0
    next_attempt_at: datetime = Field(sa_type=UTCDateTime)
    leased_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    lease_token: str | None = Field(default=None, sa_type=String(32))
    last_status_code: int | None = None
    last_error: str | None = Field(default=None, sa_type=String(1000))
    delivered_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


# -- the API ------------------------------------------------------------------------------------


class EndpointIn(RequestBody):
    url: str = pydantic.Field(
        min_length=1, max_length=MAX_URL, description="An http or https URL that takes POSTs."
    )
    events: list[WebhookKind] = pydantic.Field(
        default_factory=list, description="The kinds it wants; empty or missing means every kind."
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        return check_url(url)


class EndpointUpdate(RequestBody):
    url: str | None = pydantic.Field(default=None, min_length=1, max_length=MAX_URL)
    events: list[WebhookKind] | None = None
    enabled: bool | None = pydantic.Field(default=None, strict=True)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        return None if url is None else check_url(url)


def check_url(url: str) -> str:
    parsed = pydantic.TypeAdapter(pydantic.AnyHttpUrl).validate_python(url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError("must be an http or https URL")
    if parsed.username or parsed.password:
        raise ValueError("must not carry credentials; the signature authenticates the sender")
    return url


class EndpointPublic(BaseModel):
    id: uuid.UUID
    url: str
    events: list[str]
    enabled: bool
    created_at: datetime


class EndpointCreated(EndpointPublic):
    secret: str = pydantic.Field(
        description="whsec_…: verifies the signatures; shown only in this response."
    )


class DeliveryPublic(BaseModel):
    id: int
    endpoint_id: uuid.UUID
    message_id: str
    kind: str
    status: str
    attempts: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


class DeliveryPage(BaseModel):
    items: list[DeliveryPublic]
    next_cursor: str | None
