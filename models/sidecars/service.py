"""Sidecars: registration, configuration, token authentication, the handshake, filed reviews."""

import hashlib
import hmac
import secrets
import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import bindparam
from sqlmodel import Session, col, select, update

from models.audit.schema import AuditKind
from models.audit.service import record_audit
from models.connections.service import find_connection
from models.core import errors
from models.core.db import UTCDateTime, flush_or_conflict, new_id, write_transaction
from models.reviews.schema import Review, ReviewPublic
from models.reviews.service import review_views
from models.reviews.timing import ReviewTiming
from models.sessions.schema import SessionCreate
from models.sessions.service import SidecarOrigin, open_sidecar_review
from models.sidecars.license import LicenseSigner
from models.sidecars.schema import (
    AuthenticatedSidecar,
    HandshakeRequest,
    HandshakeResponse,
    ListenerPublic,
    Sidecar,
    SidecarConfig,
    SidecarConfigPublic,
    SidecarCreate,
    SidecarCreated,
    SidecarPublic,
    SidecarReviewCreate,
)
from models.users.schema import Organization, User, UserStatus
from models.users.service import default_organization, require_admin
from models.webhooks.events import publish_event
from models.webhooks.schema import WebhookKind

TOKEN_PREFIX = "ags_"  # noqa: S105 - marks a sidecar token, e.g. for secret scanners
TOKEN_SECRET_BYTES = 32
TOKEN_HEADER = "gateway-sidecar-token"  # noqa: S105 - a header name
MISSING_TOKEN = f"send the sidecar's token in the {TOKEN_HEADER} header"
INVALID_TOKEN = "the sidecar token is not valid: unknown, revoked or mistyped"  # noqa: S105
# Compared against when the token names no sidecar, so a miss takes as long as a mismatch.
_NO_SIDECAR_HASH = hashlib.sha256(b"no such sidecar").hexdigest()


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def sidecar_id_in(token: str) -> uuid.UUID | None:
    # Tokens are "ags_<sidecar id hex>_<secret>": the id finds the row, the hash proves the rest.
    if not token.startswith(TOKEN_PREFIX):
        return None
    try:
        return uuid.UUID(hex=token[len(TOKEN_PREFIX) : len(TOKEN_PREFIX) + 32])
    except ValueError:
        return None


def create_sidecar(
    *, db: Session, actor: User, request: SidecarCreate, now: datetime
) -> SidecarCreated:
    """Register a sidecar and return its token, which is never shown again. Commit."""
    require_admin(actor)
    sidecar_id = new_id()
    token = f"{TOKEN_PREFIX}{sidecar_id.hex}_{secrets.token_urlsafe(TOKEN_SECRET_BYTES)}"
    sidecar = Sidecar(
        id=sidecar_id,
        organization_id=actor.organization_id,
        name=request.name,
        token_hash=_token_hash(token),
        created_at=now,
    )
    with write_transaction(db):
        db.add(sidecar)
        flush_or_conflict(db, f"a sidecar named {request.name!r} already exists")
        _audit(db, AuditKind.SIDECAR_CREATED, actor, sidecar, now)
    return SidecarCreated(id=sidecar.id, name=sidecar.name, token=token)


def list_sidecars(*, db: Session, actor: User) -> list[SidecarPublic]:
    """Every sidecar of the organization, revoked ones included, by name."""
    require_admin(actor)
    sidecars = db.exec(
        select(Sidecar)
        .where(Sidecar.organization_id == actor.organization_id)
        .order_by(col(Sidecar.name), col(Sidecar.created_at))
    )
    return [sidecar_view(sidecar) for sidecar in sidecars]


def get_sidecar(*, db: Session, actor: User, sidecar_id: uuid.UUID) -> SidecarPublic:
    """One sidecar, without its token."""
    require_admin(actor)
    return sidecar_view(_get_sidecar(db, actor, sidecar_id))


def revoke_sidecar(*, db: Session, actor: User, sidecar_id: uuid.UUID, now: datetime) -> None:
    """Revoke a sidecar's token for good (again is a no-op); its name becomes free. Commit."""
    require_admin(actor)
    with write_transaction(db):
        sidecar = _get_sidecar(db, actor, sidecar_id, for_update=True)
        if sidecar.revoked_at is None:
            sidecar.revoked_at = now
            db.add(sidecar)
            _audit(db, AuditKind.SIDECAR_REVOKED, actor, sidecar, now)


def configure_sidecar(
    *, db: Session, actor: User, sidecar_id: uuid.UUID, config: SidecarConfig, now: datetime
) -> SidecarPublic:
    """Assign the configuration the sidecar must serve; listeners name existing connections."""
    require_admin(actor)
    with write_transaction(db):
        sidecar = _get_sidecar(db, actor, sidecar_id, for_update=True)
        if sidecar.revoked_at is not None:
            raise errors.Conflict(f"sidecar {sidecar.name!r} is revoked; create a new one")
        for listener in config.listeners:
            if find_connection(db=db, actor=actor, name=listener.connection) is None:
                raise errors.InvalidRequest(
                    f"listener {listener.name!r}: no connection is called {listener.connection!r}"
                )
        sidecar.config = config.model_dump(mode="json")
        sidecar.configured_at = now
        db.add(sidecar)
        _audit(
            db,
            AuditKind.SIDECAR_CONFIGURED,
            actor,
            sidecar,
            now,
            listeners=[listener.name for listener in config.listeners],
        )
    return sidecar_view(sidecar)


def _audit(
    db: Session, kind: AuditKind, actor: User, sidecar: Sidecar, now: datetime, **details: Any
) -> None:
    record_audit(
        db,
        kind=kind,
        actor=actor,
        door="api",
        target=f"sidecar:{sidecar.name}",
        now=now,
        details={"sidecar_id": str(sidecar.id), **details},
    )


def record_refused_handshake(
    *, db: Session, token: str | None, address: str, reason: str, now: datetime
) -> None:
    """A handshake refused for its token: in the audit trail and out as a webhook event.

    The sidecar the token claims to be is named when there is one; the token never is.
    """
    sidecar_id = sidecar_id_in(token or "")
    sidecar = None if sidecar_id is None else db.get(Sidecar, sidecar_id)
    organization_id = (
        sidecar.organization_id if sidecar is not None else default_organization(db).id
    )
    details = {
        "claimed_sidecar_id": None if sidecar is None else str(sidecar.id),
        "claimed_sidecar": None if sidecar is None else sidecar.name,
        "address": address,
        "reason": reason,
    }
    with write_transaction(db):
        record_audit(
            db,
            kind=AuditKind.SIDECAR_HANDSHAKE_REFUSED,
            actor=None,
            actor_name="sidecar" if sidecar is None else f"sidecar {sidecar.name}",
            organization_id=organization_id,
            door="sidecar",
            target="sidecar:" + ("unknown" if sidecar is None else sidecar.name),
            now=now,
            details=details,
        )
        publish_event(
            db,
            kind=WebhookKind.SIDECAR_HANDSHAKE_REFUSED,
            organization_id=organization_id,
            now=now,
            data=details,
        )


# Built once: the handshake is the hottest path of the service, and composing SQL for every
# request costs more than running it. Plain Core statements skip the ORM's identity map too.
_SELECT_FOR_TOKEN = sa.select(
    col(Sidecar.token_hash),
    col(Sidecar.revoked_at),
    col(Sidecar.organization_id),
    col(Sidecar.name),
    col(Sidecar.config),
).where(col(Sidecar.id) == bindparam("sidecar_id"))
_RECORD_HANDSHAKE = (
    update(Sidecar)
    .where(col(Sidecar.id) == bindparam("sidecar_id"), col(Sidecar.revoked_at).is_(None))
    .values(
        version=bindparam("reported_version"),
        last_seen_at=bindparam("seen_at", type_=UTCDateTime),
    )
)


def authenticate_sidecar(*, db: Session, token: str | None) -> AuthenticatedSidecar:
    """The live sidecar whose token this is; Unauthenticated otherwise. Records nothing."""
    if not token:
        raise errors.Unauthenticated(MISSING_TOKEN)
    sidecar_id = sidecar_id_in(token)
    row = None
    if sidecar_id is not None:
        row = db.connection().execute(_SELECT_FOR_TOKEN, {"sidecar_id": sidecar_id}).first()
    expected = _NO_SIDECAR_HASH if row is None else row.token_hash
    matches = hmac.compare_digest(expected, _token_hash(token))
    if row is None or sidecar_id is None or not matches or row.revoked_at is not None:
        raise errors.Unauthenticated(INVALID_TOKEN)
    return AuthenticatedSidecar(
        id=sidecar_id, organization_id=row.organization_id, name=row.name, config=row.config
    )


def handshake_sidecar(
    *,
    db: Session,
    sidecar: AuthenticatedSidecar,
    request: HandshakeRequest,
    signer: LicenseSigner,
    now: datetime,
) -> HandshakeResponse:
    """Record the sidecar's version and time and hand it its configuration and the license.

    Nothing is recorded unless the sidecar can run: it needs listeners, and a license.
    """
    if not sidecar.listeners:
        raise errors.NotConfigured(
            f"sidecar {sidecar.name!r} has no listeners assigned; an admin assigns them with "
            f"PUT /api/sidecars/{sidecar.id}/config, and the next handshake picks them up"
        )
    license_document = signer.current_license(sidecar.organization_id, now)
    if license_document is None:  # hourly: the organization's name is read only to re-sign
        organization = db.get_one(Organization, sidecar.organization_id)
        license_document = signer.license_for(
            organization_id=organization.id, organization_name=organization.name, now=now
        )
    with write_transaction(db):
        recorded = db.connection().execute(
            _RECORD_HANDSHAKE,
            {"sidecar_id": sidecar.id, "reported_version": request.version, "seen_at": now},
        )
        if recorded.rowcount == 0:  # revoked since it authenticated
            raise errors.Unauthenticated(INVALID_TOKEN)
    return HandshakeResponse(
        id=sidecar.id,
        name=sidecar.name,
        version=request.version,
        config=_config_view(sidecar),
        license=license_document,
    )


def file_sidecar_review(
    *,
    db: Session,
    sidecar: AuthenticatedSidecar,
    request: SidecarReviewCreate,
    timing: ReviewTiming,
    now: datetime,
) -> ReviewPublic:
    """Open a reviewed session for a statement run through one of the sidecar's listeners."""
    listener = next(
        (item for item in sidecar.listeners if item["name"] == request.listener_name), None
    )
    if listener is None:
        raise errors.InvalidRequest(
            f"sidecar {sidecar.name!r} has no listener called {request.listener_name!r}"
        )
    owner = db.exec(
        select(User).where(
            User.organization_id == sidecar.organization_id, User.sub == request.user
        )
    ).first()
    if owner is None:
        raise errors.NotFound(f"no user {request.user!r} has signed in to this service")
    if owner.status is UserStatus.INACTIVE:
        raise errors.InactiveUser(f"user {request.user!r} is inactive")
    return open_sidecar_review(
        db=db,
        owner=owner,
        request=SessionCreate(
            connection=listener["connection"],
            script=request.script,
            type=request.type,
            access_duration=request.access_duration,
            reason=request.reason,
        ),
        origin=SidecarOrigin(sidecar_id=sidecar.id, listener_name=listener["name"]),
        timing=timing,
        now=now,
    )


def get_sidecar_review(
    *, db: Session, sidecar: AuthenticatedSidecar, review_id: uuid.UUID
) -> ReviewPublic:
    """A review this sidecar filed (its decision is what the sidecar waits for)."""
    review = db.exec(
        select(Review).where(Review.id == review_id, Review.sidecar_id == sidecar.id)
    ).first()
    if review is None:
        raise errors.NotFound("this sidecar filed no review with that id")
    return review_views(db, [review])[0]


def _get_sidecar(
    db: Session, actor: User, sidecar_id: uuid.UUID, *, for_update: bool = False
) -> Sidecar:
    statement = select(Sidecar).where(
        Sidecar.id == sidecar_id, Sidecar.organization_id == actor.organization_id
    )
    sidecar = db.exec(statement.with_for_update() if for_update else statement).first()
    if sidecar is None:
        raise errors.NotFound("no sidecar has that id")
    return sidecar


def _config_view(sidecar: Sidecar | AuthenticatedSidecar) -> SidecarConfigPublic:
    return SidecarConfigPublic(
        listeners=[ListenerPublic.model_validate(item) for item in sidecar.listeners]
    )


def sidecar_view(sidecar: Sidecar) -> SidecarPublic:
    """Render a sidecar; its token hash never leaves the service."""
    return SidecarPublic(
        id=sidecar.id,
        name=sidecar.name,
        version=sidecar.version,
        last_seen_at=sidecar.last_seen_at,
        listeners=_config_view(sidecar).listeners,
        configured_at=sidecar.configured_at,
        created_at=sidecar.created_at,
        revoked_at=sidecar.revoked_at,
    )
