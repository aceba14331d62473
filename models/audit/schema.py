"""Audit events: who did what, through which door, to what; never a secret's value."""

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

import pydantic
from pydantic import BaseModel
from sqlalchemy import JSON, Index, String
from sqlmodel import Field, SQLModel

from models.core.db import UTCDateTime


class AuditKind(StrEnum):
    REVIEW_CREATED = "review.created"
    REVIEW_DECIDED = "review.decided"
    REVIEW_EXPIRED = "review.expired"
    SESSION_EXECUTED = "session.executed"
    PLUGIN_CREATED = "plugin.created"
    PLUGIN_UPDATED = "plugin.updated"
    PLUGIN_CONFIG_CHANGED = "plugin.config_changed"
    PLUGIN_DELETED = "plugin.deleted"
    RULE_CREATED = "rule.created"
    RULE_UPDATED = "rule.updated"
    RULE_DELETED = "rule.deleted"
    USER_SIGNED_UP = "user.signed_up"
    USER_UPDATED = "user.updated"
    SIGN_IN = "sign_in.succeeded"
    SIGN_IN_REFUSED = "sign_in.refused"
    SIDECAR_CREATED = "sidecar.created"
    SIDECAR_CONFIGURED = "sidecar.configured"
    SIDECAR_REVOKED = "sidecar.revoked"
    SIDECAR_HANDSHAKE_REFUSED = "sidecar.handshake_refused"
    CHAT_LINKED = "chat.linked"
    WEBHOOK_ENDPOINT_CHANGED = "webhook.endpoint_changed"


class AuditEvent(SQLModel, table=True):
    """One act. Rows are only ever inserted: the database refuses updates and deletes."""

    __tablename__ = "audit_event"
    __table_args__ = (
        # Pages walk newest first by id, filtered by organization and, optionally, one of these.
        Index("ix_audit_event_listing", "organization_id", "id"),
        Index("ix_audit_event_by_kind", "organization_id", "kind", "id"),
        Index("ix_audit_event_by_actor", "organization_id", "actor", "id"),
        Index("ix_audit_event_by_review", "review_id", "id"),
        Index("ix_audit_event_by_time", "organization_id", "at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    organization_id: uuid.UUID | None = Field(default=None, foreign_key="organization.id")
    at: datetime = Field(sa_type=UTCDateTime)
    kind: str = Field(sa_type=String(64))
    actor: str = Field(sa_type=String(320))  # a person's e-mail or sub, "accessgate", a sidecar
    actor_id: uuid.UUID | None = None
    door: str = Field(sa_type=String(16))  # api, slack, page, system, sidecar
    target: str = Field(sa_type=String(200))  # what it was done to, e.g. "review:<id>"
    review_id: uuid.UUID | None = None
    details: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)


class AuditEventPublic(BaseModel):
    id: int
    at: datetime
    kind: str
    actor: str
    door: str
    target: str
    details: dict[str, Any] = pydantic.Field(
        description="What the act was; names of changed settings, never their values."
    )


class AuditPage(BaseModel):
    items: list[AuditEventPublic]
    next_cursor: str | None = pydantic.Field(
        description="Pass it as `cursor` for the next page; null on the last page."
    )
