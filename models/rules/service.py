"""Access request rules: admin CRUD, and finding the rule that governs a connection."""

import uuid
from typing import Any

from sqlmodel import Session, col, select

from models.audit.schema import AuditKind
from models.audit.service import record_audit
from models.connections.schema import Connection
from models.core import errors
from models.core.clock import utc_now
from models.core.db import flush_or_conflict, write_transaction
from models.rules.schema import AccessRequestRule, AccessRequestRuleIn, AccessRequestRulePublic
from models.users.schema import User
from models.users.service import require_admin

RULE_NOT_FOUND = "access request rule not found"


def create_rule(
    *, db: Session, actor: User, request: AccessRequestRuleIn
) -> AccessRequestRulePublic:
    """Create a rule. A connection is governed by at most one rule. Commit."""
    require_admin(actor)
    with write_transaction(db):
        _check_connections(db, actor, request, replacing=None)
        rule = AccessRequestRule(organization_id=actor.organization_id, **request.model_dump())
        _save(db, rule, request.name)
        _audit(db, AuditKind.RULE_CREATED, actor, rule, request.model_dump(mode="json"))
    return AccessRequestRulePublic.model_validate(rule)


def replace_rule(
    *, db: Session, actor: User, rule_id: uuid.UUID, request: AccessRequestRuleIn
) -> AccessRequestRulePublic:
    """Replace every field of a rule. Reviews already created keep what they were made with."""
    require_admin(actor)
    with write_transaction(db):
        rule = _get_rule(db, actor, rule_id)
        _check_connections(db, actor, request, replacing=rule.id)
        before = AccessRequestRulePublic.model_validate(rule).model_dump(mode="json")
        for field, value in request.model_dump().items():
            setattr(rule, field, value)
        _save(db, rule, request.name)
        after = request.model_dump(mode="json")
        changed = sorted(key for key, value in after.items() if before.get(key) != value)
        _audit(db, AuditKind.RULE_UPDATED, actor, rule, {"changed": changed, "rule": after})
    return AccessRequestRulePublic.model_validate(rule)


def delete_rule(*, db: Session, actor: User, rule_id: uuid.UUID) -> None:
    """Delete a rule. Commit."""
    require_admin(actor)
    with write_transaction(db):
        rule = _get_rule(db, actor, rule_id)
        db.delete(rule)
        _audit(db, AuditKind.RULE_DELETED, actor, rule, {})


def get_rule(*, db: Session, actor: User, rule_id: uuid.UUID) -> AccessRequestRulePublic:
    """One rule of the actor's organization."""
    return AccessRequestRulePublic.model_validate(_get_rule(db, actor, rule_id))


def _get_rule(db: Session, actor: User, rule_id: uuid.UUID) -> AccessRequestRule:
    require_admin(actor)
    rule = db.get(AccessRequestRule, rule_id)
    if rule is None or rule.organization_id != actor.organization_id:
        raise errors.NotFound(RULE_NOT_FOUND)
    return rule


def list_rules(*, db: Session, actor: User) -> list[AccessRequestRulePublic]:
    """Every rule of the actor's organization, by name."""
    require_admin(actor)
    return [
        AccessRequestRulePublic.model_validate(rule)
        for rule in _rules_of(db, actor.organization_id)
    ]


def rule_for_connection(
    *, db: Session, organization_id: uuid.UUID, connection_name: str
) -> AccessRequestRule | None:
    """The rule that governs a connection, if one does."""
    # Rules are few and their connection lists are JSON, which each backend queries differently.
    for rule in _rules_of(db, organization_id):
        if connection_name in rule.connections:
            return rule
    return None


def _rules_of(db: Session, organization_id: uuid.UUID) -> list[AccessRequestRule]:
    statement = (
        select(AccessRequestRule)
        .where(AccessRequestRule.organization_id == organization_id)
        .order_by(col(AccessRequestRule.name))
    )
    return list(db.exec(statement))


def _check_connections(
    db: Session, actor: User, request: AccessRequestRuleIn, *, replacing: uuid.UUID | None
) -> None:
    known = set(
        db.exec(
            select(Connection.name).where(
                Connection.organization_id == actor.organization_id,
                col(Connection.name).in_(request.connections),
            )
        )
    )
    unknown = [name for name in request.connections if name not in known]
    if unknown:
        raise errors.InvalidRequest(f"no connection is called {', '.join(unknown)}")
    for rule in _rules_of(db, actor.organization_id):
        taken = sorted(set(rule.connections) & set(request.connections))
        if rule.id != replacing and taken:
            raise errors.Conflict(
                f"connection {', '.join(taken)} is already governed by the rule {rule.name!r}"
            )


def _save(db: Session, rule: AccessRequestRule, name: str) -> None:
    db.add(rule)
    flush_or_conflict(db, f"an access request rule named {name!r} already exists")


def _audit(
    db: Session, kind: AuditKind, actor: User, rule: AccessRequestRule, details: dict[str, Any]
) -> None:
    record_audit(
        db,
        kind=kind,
        actor=actor,
        door="api",
        target=f"rule:{rule.name}",
        now=utc_now(),
        details=details,
    )
