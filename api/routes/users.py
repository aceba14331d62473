import uuid

from fastapi import APIRouter

from api.deps import CredentialsFirstRoute, CurrentUser, DbDep
from models.users import service as user_service
from models.users.schema import UserPublic, UserUpdate

router = APIRouter(route_class=CredentialsFirstRoute, prefix="/users", tags=["users"])


@router.get("/me")
def read_me(user: CurrentUser) -> UserPublic:
    """The signed-in user."""
    return user_service.user_view(user)


@router.get("")
def list_users(db: DbDep, user: CurrentUser) -> list[UserPublic]:
    """Every user of the organization (admins)."""
    return user_service.list_users(db=db, actor=user)


@router.patch("/{user_id:uuid}")
def update_user(user_id: uuid.UUID, update: UserUpdate, db: DbDep, user: CurrentUser) -> UserPublic:
    """Change a user's status, groups or chat id (admins)."""
    return user_service.update_user(db=db, user_id=user_id, update=update, actor=user)
