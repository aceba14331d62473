"""Webhook endpoints and their deliveries (admins)."""

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import CredentialsFirstRoute, CurrentUser, DbDep, SecretBoxDep
from models.core.clock import utc_now
from models.webhooks import service as webhook_service
from models.webhooks.schema import (
    DeliveryPage,
    DeliveryPublic,
    DeliveryStatus,
    EndpointCreated,
    EndpointIn,
    EndpointPublic,
    EndpointUpdate,
)

router = APIRouter(route_class=CredentialsFirstRoute, prefix="/webhooks", tags=["webhooks"])


@router.post("/endpoints", status_code=201)
def create_endpoint(
    request: EndpointIn, db: DbDep, user: CurrentUser, secret_box: SecretBoxDep
) -> EndpointCreated:
    """Register an endpoint; its `secret` (whsec_…) is in this answer only."""
    return webhook_service.create_endpoint(
        db=db, actor=user, request=request, secret_box=secret_box, now=utc_now()
    )


@router.get("/endpoints")
def list_endpoints(db: DbDep, user: CurrentUser) -> list[EndpointPublic]:
    return webhook_service.list_endpoints(db=db, actor=user)


@router.get("/endpoints/{endpoint_id}")
def get_endpoint(endpoint_id: uuid.UUID, db: DbDep, user: CurrentUser) -> EndpointPublic:
    return webhook_service.get_endpoint(db=db, actor=user, endpoint_id=endpoint_id)


@router.put("/endpoints/{endpoint_id}")
def update_endpoint(
    endpoint_id: uuid.UUID, request: EndpointUpdate, db: DbDep, user: CurrentUser
) -> EndpointPublic:
    """Change `url`, `events` or `enabled`; what is left out stays."""
    return webhook_service.update_endpoint(
        db=db, actor=user, endpoint_id=endpoint_id, request=request, now=utc_now()
    )


@router.delete("/endpoints/{endpoint_id}", status_code=204)
def delete_endpoint(endpoint_id: uuid.UUID, db: DbDep, user: CurrentUser) -> None:
    """Remove an endpoint and its deliveries."""
    webhook_service.delete_endpoint(db=db, actor=user, endpoint_id=endpoint_id, now=utc_now())


@router.post("/endpoints/{endpoint_id}/rotate-secret")
def rotate_secret(
    endpoint_id: uuid.UUID, db: DbDep, user: CurrentUser, secret_box: SecretBoxDep
) -> EndpointCreated:
    """A new secret, in this answer only; deliveries are signed with it from now on."""
    return webhook_service.rotate_secret(
        db=db, actor=user, endpoint_id=endpoint_id, secret_box=secret_box, now=utc_now()
    )


@router.get("/deliveries")
def list_deliveries(
    db: DbDep,
    user: CurrentUser,
    endpoint: uuid.UUID | None = None,
    status: DeliveryStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[int | None, Query(ge=1)] = None,
) -> DeliveryPage:
    """Deliveries newest first, with their attempts and last error."""
    return webhook_service.list_deliveries(
        db=db, actor=user, endpoint_id=endpoint, status=status, limit=limit, cursor=cursor
    )


@router.post("/deliveries/{delivery_id}/retry")
def retry_delivery(delivery_id: int, db: DbDep, user: CurrentUser) -> DeliveryPublic:
    """Send a failed delivery again (same webhook-id); 409 unless it failed."""
    return webhook_service.retry_delivery(db=db, actor=user, delivery_id=delivery_id, now=utc_now())
