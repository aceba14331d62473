"""Users: sign-up on first sight, profile refresh, admin changes, and who is calling."""

import uuid

from sqlalchemy import bindparam, update
from sqlmodel import Session, col, select

from models.audit.schema import AuditKind
from models.audit.service import record_audit
from models.core import errors
from models.core.clock import utc_now
from models.core.db import flush_or_conflict, write_transaction
from models.users.schema import (
    ADMIN_GROUP,
    DEFAULT_ORGANIZATION,
    Organization,
    User,
    UserPublic,
    UserStatus,
    UserUpdate,
    validate_group_names,
)


def default_organization(db: Session) -> Organization:
    """Return the default organization (created by the first migration)."""
    return db.exec(select(Organization).where(Organization.name == DEFAULT_ORGANIZATION)).one()


def upsert_user(
    *,
    db: Session,
    sub: str,
    email: str | None = None,
    name: str | None = None,
    groups: list[str] | None = None,
) -> User:
    """Create the user named by ``sub`` or refresh the given parts of its profile; commit."""
    if not sub or len(sub) > 255:
        raise errors.InvalidRequest("sub must be 1 to 255 characters")
    try:
        clean_groups = None if groups is None else validate_group_names(groups)
    except ValueError as exc:
        raise errors.InvalidRequest(str(exc)) from exc
    with write_transaction(db):
        user = db.exec(select(User).where(User.sub == sub)).first()
        if user is None:
            user = User(sub=sub, organization_id=default_organization(db).id)
            db.add(user)
            db.flush()
            record_audit(
                db,
                kind=AuditKind.USER_SIGNED_UP,
                actor=user,
                door="api",
                target=f"user:{sub}",
                now=utc_now(),
                details={"groups": clean_groups or []},
            )
        if email is not None:
            user.email = email
        if name is not None:
            user.name = name
        if clean_groups is not None:
            user.groups = clean_groups
        db.add(user)
    return user


def authenticated_user(*, db: Session, sub: str) -> User:
    """Return the active user named by a verified token, or raise why they may not proceed."""
    user = db.exec(_USER_BY_SUB, params={"sub": sub}).first()
    if user is None:
        raise errors.Unauthenticated("the token names a user this service does not know")
    return require_active(user)


# Every authenticated request runs it: built once.
_USER_BY_SUB = select(User).where(col(User.sub) == bindparam("sub"))


def require_active(user: User) -> User:
    """Return ``user`` unless an administrator set them inactive."""
    if user.status is UserStatus.INACTIVE:
        raise errors.InactiveUser("your account is inactive; ask an administrator")
    return user


def require_admin(user: User) -> None:
    """Raise unless ``user`` is in the admin group."""
    if not user.is_admin:
        raise errors.AdminRequired("only administrators can do this")


def list_users(*, db: Session, actor: User) -> list[UserPublic]:
    """Every user of the actor's organization (admins only)."""
    require_admin(actor)
    statement = (
        select(User)
        .where(User.organization_id == actor.organization_id)
        .order_by(col(User.created_at))
    )
    return [user_view(user) for user in db.exec(statement)]


def update_user(*, db: Session, user_id: uuid.UUID, update: UserUpdate, actor: User) -> UserPublic:
    """Apply an admin's change to a user; commit."""
    require_admin(actor)
    with write_transaction(db):
        user = db.get(User, user_id)
        if user is None or user.organization_id != actor.organization_id:
            raise errors.NotFound("user not found")
        changes = update.model_dump(exclude_unset=True)
        before = {"status": user.status.value, "groups": user.groups, "chat_id": user.chat_id}
        if user.id == actor.id and changes.get("status") is UserStatus.INACTIVE:
            raise errors.InvalidRequest("you cannot set yourself inactive")
        if user.id == actor.id and update.groups is not None and ADMIN_GROUP not in update.groups:
            raise errors.InvalidRequest("you cannot remove yourself from the admin group")
        if "status" in changes and update.status is not None:
            user.status = update.status
        if "groups" in changes and update.groups is not None:
            user.groups = update.groups
        if "chat_id" in changes:
            user.chat_id = update.chat_id or None
        db.add(user)
        flush_or_conflict(db, "that chat_id is already linked to another user")
        after = {"status": user.status.value, "groups": user.groups, "chat_id": user.chat_id}
        record_audit(
            db,
            kind=AuditKind.USER_UPDATED,
            actor=actor,
            door="api",
            target=f"user:{user.sub}",
            now=utc_now(),
            details={
                key: {"before": before[key], "after": after[key]}
                for key in after
                if before[key] != after[key]
            },
        )
    return user_view(user)


def user_view(user: User) -> UserPublic:
    """A user as the API shows it."""
    return UserPublic.model_validate(user)


def set_reminder_preference(*, db: Session, user: User, by_dm: bool) -> None:
    """Reminders for ``user`` as one digest DM an interval (``by_dm``), or under each card."""
    with write_transaction(db):
        db.execute(update(User).where(col(User.id) == user.id).values(reminders_by_dm=by_dm))
