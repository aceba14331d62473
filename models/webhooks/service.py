"""Webhook endpoints (admins) and the deliveries made to them."""

import base64
import secrets
import uuid
from datetime import datetime

from sqlalchemy import select as core_select
from sqlalchemy import update
from sqlmodel import Session, col, select

from models.audit.schema import AuditKind
from models.audit.service import record_audit
from models.core import errors
from models.core.db import table_of, write_transaction
from models.core.sealing import SecretBox
from models.users.schema import User
from models.users.service import require_admin
from models.webhooks.schema import (
    DeliveryPage,
    DeliveryPublic,
    DeliveryStatus,
    EndpointCreated,
    EndpointIn,
    EndpointPublic,
    EndpointUpdate,
    WebhookDelivery,
    WebhookEndpoint,
)

ENDPOINT_NOT_FOUND = "webhook endpoint not found"
SECRET_CONTEXT = "webhook endpoint secret"  # noqa: S105 - the sealing context, not a secret
_deliveries = table_of(WebhookDelivery)


def new_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def open_secret(secret_box: SecretBox, endpoint_id: uuid.UUID, sealed: str) -> str:
    return secret_box.open(sealed, context=f"{SECRET_CONTEXT}:{endpoint_id}").decode()


def _seal(secret_box: SecretBox, endpoint_id: uuid.UUID, secret: str) -> str:
    # Bound to the endpoint: a sealed secret copied to another row does not open.
    return secret_box.seal(secret.encode(), context=f"{SECRET_CONTEXT}:{endpoint_id}")


def _view(endpoint: WebhookEndpoint) -> EndpointPublic:
    return EndpointPublic(
        id=endpoint.id,
        url=endpoint.url,
        events=endpoint.events,
        enabled=endpoint.enabled,
        created_at=endpoint.created_at,
    )


def _audit(db: Session, actor: User, endpoint: WebhookEndpoint, action: str, now: datetime) -> None:
    record_audit(
        db,
        kind=AuditKind.WEBHOOK_ENDPOINT_CHANGED,
        actor=actor,
        door="api",
        target=f"webhook_endpoint:{endpoint.id}",
        now=now,
        details={
            "action": action,
            "url": endpoint.url,
            "events": endpoint.events,
            "enabled": endpoint.enabled,
        },
    )


def create_endpoint(
    *, db: Session, actor: User, request: EndpointIn, secret_box: SecretBox, now: datetime
) -> EndpointCreated:
    require_admin(actor)
    secret = new_secret()
    endpoint = WebhookEndpoint(
        organization_id=actor.organization_id,
        url=request.url,
        events=sorted({kind.value for kind in request.events}),
        sealed_secret="",
        created_at=now,
    )
    endpoint.sealed_secret = _seal(secret_box, endpoint.id, secret)
    with write_transaction(db):
        db.add(endpoint)
        db.flush()
        _audit(db, actor, endpoint, "created", now)
    return EndpointCreated(**_view(endpoint).model_dump(), secret=secret)


def _endpoint(
    db: Session, actor: User, endpoint_id: uuid.UUID, *, lock: bool = False
) -> WebhookEndpoint:
    require_admin(actor)
    endpoint = db.get(WebhookEndpoint, endpoint_id, with_for_update=lock)
    if endpoint is None or endpoint.organization_id != actor.organization_id:
        raise errors.NotFound(ENDPOINT_NOT_FOUND)
    return endpoint


def list_endpoints(*, db: Session, actor: User) -> list[EndpointPublic]:
    require_admin(actor)
    found = db.exec(
        select(WebhookEndpoint)
        .where(WebhookEndpoint.organization_id == actor.organization_id)
        .order_by(col(WebhookEndpoint.created_at), col(WebhookEndpoint.id))
    )
    return [_view(endpoint) for endpoint in found]


def get_endpoint(*, db: Session, actor: User, endpoint_id: uuid.UUID) -> EndpointPublic:
    return _view(_endpoint(db, actor, endpoint_id))


def update_endpoint(
    *, db: Session, actor: User, endpoint_id: uuid.UUID, request: EndpointUpdate, now: datetime
) -> EndpointPublic:
    with write_transaction(db):
        endpoint = _endpoint(db, actor, endpoint_id, lock=True)
        if request.url is not None:
            endpoint.url = request.url
        if request.events is not None:
            endpoint.events = sorted({kind.value for kind in request.events})
        if request.enabled is not None:
            endpoint.enabled = request.enabled
        db.add(endpoint)
        db.flush()
        _audit(db, actor, endpoint, "updated", now)
    return _view(endpoint)


def delete_endpoint(*, db: Session, actor: User, endpoint_id: uuid.UUID, now: datetime) -> None:
    with write_transaction(db):
        endpoint = _endpoint(db, actor, endpoint_id, lock=True)
        db.execute(_deliveries.delete().where(_deliveries.c.endpoint_id == endpoint.id))
        db.delete(endpoint)
        _audit(db, actor, endpoint, "deleted", now)


def rotate_secret(
    *, db: Session, actor: User, endpoint_id: uuid.UUID, secret_box: SecretBox, now: datetime
) -> EndpointCreated:
    """A new secret, shown once; deliveries from now on are signed with it."""
    secret = new_secret()
    with write_transaction(db):
        endpoint = _endpoint(db, actor, endpoint_id, lock=True)
        endpoint.sealed_secret = _seal(secret_box, endpoint.id, secret)
        db.add(endpoint)
        db.flush()
        _audit(db, actor, endpoint, "secret_rotated", now)
    return EndpointCreated(**_view(endpoint).model_dump(), secret=secret)


# -- deliveries ---------------------------------------------------------------------------------


def _delivery_view(row: WebhookDelivery) -> DeliveryPublic:
    assert row.id is not None
    return DeliveryPublic(
        id=row.id,
        endpoint_id=row.endpoint_id,
        message_id=row.message_id,
        kind=row.kind,
        status=row.status,
        attempts=row.attempts,
        next_attempt_at=row.next_attempt_at if row.status == DeliveryStatus.PENDING else None,
        last_status_code=row.last_status_code,
        last_error=row.last_error,
        created_at=row.event_at,
        delivered_at=row.delivered_at,
    )


def list_deliveries(
    *,
    db: Session,
    actor: User,
    endpoint_id: uuid.UUID | None,
    status: DeliveryStatus | None,
    limit: int,
    cursor: int | None,
) -> DeliveryPage:
    """Deliveries newest first, of one endpoint or all of the organization's."""
    require_admin(actor)
    endpoints = core_select(table_of(WebhookEndpoint).c.id).where(
        table_of(WebhookEndpoint).c.organization_id == actor.organization_id
    )
    statement = select(WebhookDelivery).where(col(WebhookDelivery.endpoint_id).in_(endpoints))
    if endpoint_id is not None:
        statement = statement.where(WebhookDelivery.endpoint_id == endpoint_id)
    if status is not None:
        statement = statement.where(WebhookDelivery.status == status.value)
    if cursor is not None:
        statement = statement.where(col(WebhookDelivery.id) < cursor)
    rows = list(db.exec(statement.order_by(col(WebhookDelivery.id).desc()).limit(limit + 1)))
    items = [_delivery_view(row) for row in rows[:limit]]
    more = len(rows) > limit
    return DeliveryPage(items=items, next_cursor=str(items[-1].id) if more and items else None)


def retry_delivery(*, db: Session, actor: User, delivery_id: int, now: datetime) -> DeliveryPublic:
    """Send a failed delivery again, from its first attempt, with the same webhook-id."""
    require_admin(actor)
    with write_transaction(db):
        delivery = db.get(WebhookDelivery, delivery_id, with_for_update=True)
        endpoint = None if delivery is None else db.get(WebhookEndpoint, delivery.endpoint_id)
        if (
            delivery is None
            or endpoint is None
            or endpoint.organization_id != actor.organization_id
        ):
            raise errors.NotFound("webhook delivery not found")
        if delivery.status != DeliveryStatus.FAILED:
            raise errors.Conflict(
                f"this delivery is {delivery.status}; only failed ones are retried"
            )
        db.execute(
            update(_deliveries)
            .where(_deliveries.c.id == delivery_id)
            .values(
                status=DeliveryStatus.PENDING.value,
                attempts=0,
                next_attempt_at=now,
                leased_until=None,
                lease_token=None,
            )
        )
    db.refresh(delivery)
    return _delivery_view(delivery)
