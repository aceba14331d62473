"""Publishing webhook events: a row in the transaction of the act, fanned out later."""

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlmodel import Session

from models.core.db import table_of
from models.delivery.outbox import note_new_events
from models.webhooks.schema import PAYLOAD_VERSION, WebhookEvent, WebhookKind

_INSERT = insert(table_of(WebhookEvent))  # decisions publish one on every call: built once


def publish_event(
    db: Session,
    *,
    kind: WebhookKind,
    organization_id: uuid.UUID,
    now: datetime,
    data: dict[str, Any],
    review_id: uuid.UUID | None = None,
) -> None:
    """Add an event to the caller's transaction. ``data`` is what consumers read: ids, names,
    statuses and reasons; never a secret, a token or a script."""
    db.execute(
        _INSERT,
        {
            "organization_id": organization_id,
            "kind": kind.value,
            "review_id": review_id,
            "data": {"version": PAYLOAD_VERSION, **data},
            "created_at": now,
            "fanned_out": False,
        },
    )
    note_new_events(db)
