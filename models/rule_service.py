"""Access request rules: admin CRUD, and finding the rule that governs a connection."""

import uuid

from sqlmodel import Session, col, select

from models import errors
from models.connections import Connection
from models.db import flush_or_conflict, write_transaction
from models.rules import AccessRequestRule, AccessRequestRuleIn
from models.user_service import require_admin
from models.users import User

RULE_NOT_FOUND = "access request rule not found"


def create_rule(
    *, session: Session, actor: User, request: AccessRequestRuleIn
) -> AccessRequestRule:
    """Create a rule. A connection is governed by at most one rule. Commit."""
    require_admin(actor)
    with write_transaction(session):
        _check_connections(session, actor, request, replacing=None)
        rule = AccessRequestRule(organization_id=actor.organization_id, **request.model_dump())
        _save(session, rule, request.name)
    return rule


def replace_rule(
    *, session: Session, actor: User, rule_id: uuid.UUID, request: AccessRequestRuleIn
) -> AccessRequestRule:
    """Replace every field of a rule. Reviews already created keep what they were made with."""
    require_admin(actor)
    with write_transaction(session):
        rule = get_rule(session=session, actor=actor, rule_id=rule_id)
        _check_connections(session, actor, request, replacing=rule.id)
        for field, value in request.model_dump().items():
            setattr(rule, field, value)
        _save(session, rule, request.name)
    return rule


def delete_rule(*, session: Session, actor: User, rule_id: uuid.UUID) -> None:
    """Delete a rule. Commit."""
    require_admin(actor)
    with write_transaction(session):
        session.delete(get_rule(session=session, actor=actor, rule_id=rule_id))


def get_rule(*, session: Session, actor: User, rule_id: uuid.UUID) -> AccessRequestRule:
    """One rule of the actor's organization."""
    require_admin(actor)
    rule = session.get(AccessRequestRule, rule_id)
    if rule is None or rule.organization_id != actor.organization_id:
        raise errors.NotFound(RULE_NOT_FOUND)
    return rule


def list_rules(*, session: Session, actor: User) -> list[AccessRequestRule]:
    """Every rule of the actor's organization, by name."""
    require_admin(actor)
    return _rules_of(session, actor.organization_id)


def rule_for_connection(
    *, session: Session, organization_id: uuid.UUID, connection_name: str
) -> AccessRequestRule | None:
    """The rule that governs a connection, if one does."""
    # Rules are few and their connection lists are JSON, which each backend queries differently.
    for rule in _rules_of(session, organization_id):
        if connection_name in rule.connections:
            return rule
    return None


def _rules_of(session: Session, organization_id: uuid.UUID) -> list[AccessRequestRule]:
    statement = (
        select(AccessRequestRule)
        .where(AccessRequestRule.organization_id == organization_id)
        .order_by(col(AccessRequestRule.name))
    )
    return list(session.exec(statement))


def _check_connections(
    session: Session, actor: User, request: AccessRequestRuleIn, *, replacing: uuid.UUID | None
) -> None:
    known = set(
        session.exec(
            select(Connection.name).where(
                Connection.organization_id == actor.organization_id,
                col(Connection.name).in_(request.connections),
            )
        )
    )
    unknown = [name for name in request.connections if name not in known]
    if unknown:
        raise errors.InvalidRequest(f"no connection is called {', '.join(unknown)}")
    for rule in _rules_of(session, actor.organization_id):
        taken = sorted(set(rule.connections) & set(request.connections))
        if rule.id != replacing and taken:
            raise errors.Conflict(
                f"connection {', '.join(taken)} is already governed by the rule {rule.name!r}"
            )


def _save(session: Session, rule: AccessRequestRule, name: str) -> None:
    session.add(rule)
    flush_or_conflict(session, f"an access request rule named {name!r} already exists")
