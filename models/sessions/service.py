"""Sessions: opening one creates its review when review is configured; executing checks it."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, select

from models.audit.schema import AuditKind
from models.audit.service import record_audit
from models.connections.schema import Connection
from models.connections.service import find_connection
from models.core import errors
from models.core.db import write_transaction
from models.delivery.outbox import EventKind, record_review_event
from models.plugins.schema import PluginName
from models.plugins.service import access_control_groups, plugin_connection_config
from models.reviews.machine import ReviewStatus, parse_clock_time, within_time_window
from models.reviews.schema import Review, ReviewGroup, ReviewPublic, ReviewType
from models.reviews.service import event_review, mirror_review_status, review_views
from models.reviews.timing import ReviewTiming
from models.rules.service import rule_for_connection
from models.sessions.schema import GatewaySession, SessionCreate, SessionPublic, session_status
from models.users.schema import User
from models.webhooks.events import publish_event
from models.webhooks.schema import WebhookKind

SESSION_NOT_FOUND = "session not found"
NO_DEADLINES = ReviewTiming()


@dataclass(frozen=True)
class ReviewPolicy:
    """How sessions on one connection are reviewed."""

    groups: list[str]
    force_approval_groups: list[str]
    min_approvals: int | None
    access_max_duration: int | None
    rule_name: str | None
    distinct_approvers: bool = False
    no_self_force_approval: bool = False
    require_reason: bool = False


def review_policy(
    db: Session, *, organization_id: uuid.UUID, connection_id: uuid.UUID, connection_name: str
) -> ReviewPolicy | None:
    """The rule governing the connection, else the review plugin's groups for it, else None."""
    rule = rule_for_connection(
        db=db, organization_id=organization_id, connection_name=connection_name
    )
    if rule is not None:
        return ReviewPolicy(
            groups=rule.approval_groups,
            force_approval_groups=rule.force_approval_groups,
            min_approvals=rule.min_approvals,
            access_max_duration=rule.access_max_duration,
            rule_name=rule.name,
            distinct_approvers=rule.distinct_approvers,
            no_self_force_approval=rule.no_self_force_approval,
            require_reason=rule.require_reason,
        )
    groups = plugin_connection_config(
        db=db, plugin_name=PluginName.REVIEW, connection_id=connection_id
    )
    if not groups:
        return None
    return ReviewPolicy(
        groups=groups,
        force_approval_groups=[],
        min_approvals=None,
        access_max_duration=None,
        rule_name=None,
    )


@dataclass(frozen=True)
class SidecarOrigin:
    """The sidecar, and its listener, that a session came through."""

    sidecar_id: uuid.UUID
    listener_name: str


def open_session(
    *,
    db: Session,
    owner: User,
    request: SessionCreate,
    now: datetime,
    timing: ReviewTiming = NO_DEADLINES,
) -> SessionPublic:
    """Open a session on a connection, with a PENDING review when review is configured."""
    with write_transaction(db):
        gateway_session, review = _open(db, owner, request, now=now, origin=None, timing=timing)
    return _session_view(db, gateway_session, review)


def open_sidecar_review(
    *,
    db: Session,
    owner: User,
    request: SessionCreate,
    origin: SidecarOrigin,
    timing: ReviewTiming,
    now: datetime,
) -> ReviewPublic:
    """Open a session for a statement a sidecar intercepted, and return its review.

    A connection that needs no review has nothing to file: NotConfigured, and nothing is stored.
    """
    with write_transaction(db):
        gateway_session, review = _open(db, owner, request, now=now, origin=origin, timing=timing)
        if review is None:
            raise errors.NotConfigured(
                f"connection {gateway_session.connection_name!r} has no reviewers configured, "
                "so its statements run without review"
            )
    return review_views(db, [review])[0]


def _open(
    db: Session,
    owner: User,
    request: SessionCreate,
    *,
    now: datetime,
    origin: SidecarOrigin | None,
    timing: ReviewTiming,
) -> tuple[GatewaySession, Review | None]:
    connection = find_connection(db=db, actor=owner, name=request.connection)
    if connection is None:
        raise errors.NotFound(f"no connection is called {request.connection!r}")
    check_access_control(db, owner, connection)
    policy = review_policy(
        db,
        organization_id=owner.organization_id,
        connection_id=connection.id,
        connection_name=connection.name,
    )
    reason = (request.reason or "").strip() or None
    if policy is not None and policy.require_reason and reason is None:
        raise errors.InvalidRequest(
            f"reason: rule {policy.rule_name!r} requires a reason for access to connection "
            f"{connection.name!r}; say why you need it"
        )
    access_duration = request.access_duration
    if policy is not None and policy.access_max_duration is not None:
        access_duration = min(access_duration, policy.access_max_duration)
    gateway_session = GatewaySession(
        organization_id=owner.organization_id,
        owner_id=owner.id,
        connection_id=connection.id,
        connection_name=connection.name,
        script=request.script,
        type=request.type,
        access_duration=access_duration,
        created_at=now,
    )
    db.add(gateway_session)
    # The tables have no ORM relationships, so rows go in parent-first by explicit flushes.
    db.flush()
    review = None
    if policy is not None:
        review = _create_review(
            db, gateway_session, policy, now=now, origin=origin, timing=timing, reason=reason
        )
        publish_event(
            db,
            kind=WebhookKind.REVIEW_CREATED,
            organization_id=review.organization_id,
            review_id=review.id,
            now=now,
            data={
                **event_review(review),
                "requester": {"id": str(owner.id), "email": owner.email, "name": owner.name},
                "groups": policy.groups,
                "rule": policy.rule_name,
                "sidecar_id": None if origin is None else str(origin.sidecar_id),
                "listener": None if origin is None else origin.listener_name,
            },
        )
        record_audit(
            db,
            kind=AuditKind.REVIEW_CREATED,
            actor=owner,
            door="api" if origin is None else "sidecar",
            target=f"review:{review.id}",
            review_id=review.id,
            now=now,
            details={
                "connection": connection.name,
                "type": gateway_session.type.value,
                "reason": reason,
                "rule": policy.rule_name,
                "sidecar_id": None if origin is None else str(origin.sidecar_id),
                "listener": None if origin is None else origin.listener_name,
            },
        )
    return gateway_session, review


def check_access_control(db: Session, user: User, connection: Connection) -> None:
    """With the access_control plugin on, only the connection's groups (and admins) may use it."""
    if user.is_admin:
        return
    allowed = access_control_groups(
        db=db, organization_id=user.organization_id, connection_id=connection.id
    )
    if allowed is None or set(allowed) & set(user.groups):
        return
    raise errors.Forbidden(
        f"access control allows none of your groups on connection {connection.name!r}; "
        "ask an admin to add one of them to the access_control plugin"
    )


def _create_review(
    db: Session,
    gateway_session: GatewaySession,
    policy: ReviewPolicy,
    *,
    now: datetime,
    origin: SidecarOrigin | None,
    timing: ReviewTiming,
    reason: str | None,
) -> Review:
    review = Review(
        organization_id=gateway_session.organization_id,
        session_id=gateway_session.id,
        owner_id=gateway_session.owner_id,
        connection_name=gateway_session.connection_name,
        type=gateway_session.type,
        min_approvals=policy.min_approvals,
        force_approval_groups=policy.force_approval_groups,
        distinct_approvers=policy.distinct_approvers,
        no_self_force_approval=policy.no_self_force_approval,
        access_duration=gateway_session.access_duration,
        access_request_rule_name=policy.rule_name,
        created_at=now,
        listener_name=None if origin is None else origin.listener_name,
        sidecar_id=None if origin is None else origin.sidecar_id,
        reason=reason,
        expires_at=timing.deadline(now),
        next_reminder_at=timing.reminder_after(now, sent=0),
    )
    db.add(review)
    db.flush()
    for group in policy.groups:
        db.add(
            ReviewGroup(
                review_id=review.id,
                organization_id=review.organization_id,
                review_created_at=review.created_at,
                group=group,
            )
        )
    record_review_event(
        db,
        kind=EventKind.REVIEW_CREATED,
        review_id=review.id,
        session_id=gateway_session.id,
        status=ReviewStatus.PENDING.value,
        now=now,
    )
    return review


def get_session(*, db: Session, viewer: User, session_id: uuid.UUID) -> SessionPublic:
    """A session its owner or an admin may see."""
    gateway_session = _visible_session(db, viewer, session_id)
    return _session_view(db, gateway_session, _review_of(db, gateway_session.id))


def execute_session(
    *, db: Session, actor: User, session_id: uuid.UUID, now: datetime
) -> SessionPublic:
    """Start the session if its review allows it now; a onetime review moves to PROCESSING."""
    with write_transaction(db):
        gateway_session = _visible_session(db, actor, session_id)
        if gateway_session.owner_id != actor.id and not actor.is_admin:
            raise errors.Forbidden("only the owner of the session can execute it")
        review = db.exec(
            select(Review).where(Review.session_id == gateway_session.id).with_for_update()
        ).first()
        if review is not None:
            _check_review_allows_execution(review, now)
            if review.type is ReviewType.ONETIME:
                _start_processing(db, review, actor=actor, now=now)
        elif gateway_session.executed_at is not None and gateway_session.type is ReviewType.ONETIME:
            raise errors.InvalidRequest("this onetime session has already been executed")
        if gateway_session.executed_at is None:
            gateway_session.executed_at = now
            db.add(gateway_session)
            publish_event(
                db,
                kind=WebhookKind.SESSION_EXECUTED,
                organization_id=gateway_session.organization_id,
                review_id=None if review is None else review.id,
                now=now,
                data={
                    "session_id": str(gateway_session.id),
                    "review_id": None if review is None else str(review.id),
                    "connection": gateway_session.connection_name,
                    "type": gateway_session.type.value,
                    "actor": {"id": str(actor.id), "email": actor.email, "name": actor.name},
                },
            )
            record_audit(
                db,
                kind=AuditKind.SESSION_EXECUTED,
                actor=actor,
                door="api",
                target=f"session:{gateway_session.id}",
                review_id=None if review is None else review.id,
                now=now,
                details={"connection": gateway_session.connection_name},
            )
    return _session_view(db, gateway_session, review)


def _check_review_allows_execution(review: Review, now: datetime) -> None:
    if review.status is not ReviewStatus.APPROVED:
        raise errors.NotApproved(f"the session cannot run: its review is {review.status}")
    if review.revoke_at is not None and now >= review.revoke_at:
        raise errors.NotApproved(
            f"the access this review granted ended at {review.revoke_at.isoformat()}"
        )
    if review.time_window is not None:
        configuration = review.time_window["configuration"]
        start = parse_clock_time(configuration["start_time"])
        end = parse_clock_time(configuration["end_time"])
        if not within_time_window(start, end, now):
            raise errors.OutsideTimeWindow(
                f"the session may only run between {configuration['start_time']} and "
                f"{configuration['end_time']} UTC"
            )


def _start_processing(db: Session, review: Review, *, actor: User, now: datetime) -> None:
    review.status = ReviewStatus.PROCESSING
    db.add(review)
    mirror_review_status(db, review.id, ReviewStatus.PROCESSING)
    record_review_event(
        db,
        kind=EventKind.REVIEW_UPDATED,
        review_id=review.id,
        session_id=review.session_id,
        status=ReviewStatus.PROCESSING.value,
        now=now,
        details={"status_before": ReviewStatus.APPROVED.value, "actor_id": str(actor.id)},
    )


def _visible_session(db: Session, viewer: User, session_id: uuid.UUID) -> GatewaySession:
    gateway_session = db.get(GatewaySession, session_id)
    if (
        gateway_session is None
        or gateway_session.organization_id != viewer.organization_id
        or (gateway_session.owner_id != viewer.id and not viewer.is_admin)
    ):
        raise errors.NotFound(SESSION_NOT_FOUND)
    return gateway_session


def _review_of(db: Session, session_id: uuid.UUID) -> Review | None:
    return db.exec(select(Review).where(Review.session_id == session_id)).first()


def _session_view(
    db: Session, gateway_session: GatewaySession, review: Review | None
) -> SessionPublic:
    return SessionPublic(
        id=gateway_session.id,
        connection=gateway_session.connection_name,
        type=gateway_session.type,
        status=session_status(
            None if review is None else review.status, gateway_session.executed_at
        ),
        script=gateway_session.script,
        user_id=gateway_session.owner_id,
        access_duration=gateway_session.access_duration,
        review=None if review is None else review_views(db, [review])[0],
        created_at=gateway_session.created_at,
        executed_at=gateway_session.executed_at,
    )
