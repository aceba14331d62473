import uuid

from fastapi import APIRouter, Response

from api.deps import CredentialsFirstRoute, CurrentUser, DbDep
from models.rules import service as rule_service
from models.rules.schema import AccessRequestRuleIn, AccessRequestRulePublic

router = APIRouter(
    route_class=CredentialsFirstRoute, prefix="/access-request-rules", tags=["access request rules"]
)


@router.post("", status_code=201)
def create_rule(
    request: AccessRequestRuleIn, db: DbDep, user: CurrentUser
) -> AccessRequestRulePublic:
    """Create a rule: who reviews sessions on its connections, and how (admins)."""
    return rule_service.create_rule(db=db, actor=user, request=request)


@router.get("")
def list_rules(db: DbDep, user: CurrentUser) -> list[AccessRequestRulePublic]:
    """Every rule, by name (admins)."""
    return rule_service.list_rules(db=db, actor=user)


@router.get("/{rule_id}")
def get_rule(rule_id: uuid.UUID, db: DbDep, user: CurrentUser) -> AccessRequestRulePublic:
    """One rule (admins)."""
    return rule_service.get_rule(db=db, actor=user, rule_id=rule_id)


@router.put("/{rule_id}")
def replace_rule(
    rule_id: uuid.UUID, request: AccessRequestRuleIn, db: DbDep, user: CurrentUser
) -> AccessRequestRulePublic:
    """Replace a rule (admins). Reviews already created keep their groups."""
    return rule_service.replace_rule(db=db, actor=user, rule_id=rule_id, request=request)


@router.delete("/{rule_id}", status_code=204)
def delete_rule(rule_id: uuid.UUID, db: DbDep, user: CurrentUser) -> Response:
    """Delete a rule (admins)."""
    rule_service.delete_rule(db=db, actor=user, rule_id=rule_id)
    return Response(status_code=204)
