import uuid
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from api.deps import (
    CredentialsFirstRoute,
    CurrentSidecar,
    CurrentUser,
    DbDep,
    authenticate_sidecar,
    client_address,
    sidecar_token,
)
from api.errors import json_body_openapi, more_error_responses, validated_body
from models.core import errors
from models.core.clock import utc_now
from models.core.db import db_scope
from models.reviews.schema import ReviewPublic
from models.reviews.timing import ReviewTiming
from models.sidecars import service as sidecar_service
from models.sidecars.license import LicenseSigner
from models.sidecars.schema import (
    HandshakeRequest,
    HandshakeResponse,
    SidecarConfig,
    SidecarCreate,
    SidecarCreated,
    SidecarPublic,
    SidecarReviewCreate,
)

router = APIRouter(route_class=CredentialsFirstRoute, prefix="/sidecars", tags=["sidecars"])

NOT_CONFIGURED = more_error_responses({412: "No configuration with listeners is assigned"})
LICENSE_UNREADABLE = more_error_responses({500: "The license cannot be read"})


@router.post(
    "/handshake",
    response_model=HandshakeResponse,
    responses=NOT_CONFIGURED | LICENSE_UNREADABLE,
    openapi_extra=json_body_openapi(HandshakeRequest),
)
async def handshake(
    request: Request, token: Annotated[str | None, Depends(sidecar_token)]
) -> Response:
    """Record the sidecar's version and return what it must serve, with the license (spec 4.3).

    Authenticated only by the `gateway-sidecar-token` header, checked before the body is read.
    While no configuration with listeners is assigned the answer is 412 and nothing is recorded.
    """
    # The hot path of every sidecar: all of it runs in one worker thread (one hop), rather than
    # a hop for each dependency; sidecars handshake often and all at once. The answer is built
    # by the service already, so it is serialized once, not re-validated.
    if not token:
        raise errors.Unauthenticated(sidecar_service.MISSING_TOKEN)
    # A real handshake body is a few hundred bytes, sent with the headers: reading one that
    # small up front costs nothing and saves the worker thread a trip back to the event loop.
    # Any other body is read only once the token is verified.
    declared = request.headers.get("content-length", "")
    small = declared.isdigit() and int(declared) <= SMALL_BODY_BYTES
    raw_body = await request.body() if small else None
    answer = await run_in_threadpool(_handshake, request, token, raw_body)
    return Response(answer.model_dump_json(), media_type="application/json")


SMALL_BODY_BYTES = 16 * 1024


def _handshake(request: Request, token: str, raw_body: bytes | None) -> HandshakeResponse:
    state = request.app.state
    engine: Engine = state.engine
    signer: LicenseSigner = state.license_signer
    with db_scope(engine) as db:
        sidecar = authenticate_sidecar(
            db=db,
            token=token,
            throttle=state.throttle,
            address=client_address(request),
            handshake=True,
        )
        if raw_body is None:  # at most ACCESSGATE_MAX_BODY_BYTES, read by the event loop
            raw_body = anyio.from_thread.run(request.body)
        return sidecar_service.handshake_sidecar(
            db=db,
            sidecar=sidecar,
            request=validated_body(HandshakeRequest, raw_body),
            signer=signer,
            now=utc_now(),
        )


@router.post("/reviews", status_code=201, responses=NOT_CONFIGURED)
def file_review(
    sidecar: CurrentSidecar, request: SidecarReviewCreate, db: DbDep, http: Request
) -> ReviewPublic:
    """File a review for a statement a user runs through one of the sidecar's listeners.

    Authenticated by the `gateway-sidecar-token` header. The review names the listener and
    the sidecar, and follows the same rules as any other.
    """
    return sidecar_service.file_sidecar_review(
        db=db,
        sidecar=sidecar,
        request=request,
        timing=ReviewTiming.of(http.app.state.settings),
        now=utc_now(),
    )


@router.get("/reviews/{review_id}")
def get_filed_review(review_id: uuid.UUID, sidecar: CurrentSidecar, db: DbDep) -> ReviewPublic:
    """A review this sidecar filed, to learn its decision (sidecar token)."""
    return sidecar_service.get_sidecar_review(db=db, sidecar=sidecar, review_id=review_id)


@router.post("", status_code=201)
def create_sidecar(request: SidecarCreate, db: DbDep, user: CurrentUser) -> SidecarCreated:
    """Register a sidecar (admins). Its token is in this response only; keep it safe."""
    return sidecar_service.create_sidecar(db=db, actor=user, request=request, now=utc_now())


@router.get("")
def list_sidecars(db: DbDep, user: CurrentUser) -> list[SidecarPublic]:
    """Every sidecar, revoked ones included (admins)."""
    return sidecar_service.list_sidecars(db=db, actor=user)


@router.get("/{sidecar_id:uuid}")
def get_sidecar(sidecar_id: uuid.UUID, db: DbDep, user: CurrentUser) -> SidecarPublic:
    """One sidecar, with its version and when it last handshook (admins)."""
    return sidecar_service.get_sidecar(db=db, actor=user, sidecar_id=sidecar_id)


@router.put("/{sidecar_id:uuid}/config")
def configure_sidecar(
    sidecar_id: uuid.UUID, config: SidecarConfig, db: DbDep, user: CurrentUser
) -> SidecarPublic:
    """Assign the configuration the sidecar must serve (admins); its next handshake gets it."""
    return sidecar_service.configure_sidecar(
        db=db, actor=user, sidecar_id=sidecar_id, config=config, now=utc_now()
    )


@router.delete("/{sidecar_id:uuid}", status_code=204)
def revoke_sidecar(sidecar_id: uuid.UUID, db: DbDep, user: CurrentUser) -> None:
    """Revoke a sidecar's token (admins): its handshakes are refused from now on."""
    sidecar_service.revoke_sidecar(db=db, actor=user, sidecar_id=sidecar_id, now=utc_now())
