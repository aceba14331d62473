"""Dependencies shared by the routes: the database session, the caller, the chat bot."""

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from sqlmodel import Session

from models.chat.runtime import ChatRuntime
from models.core import errors
from models.core.db import db_scope
from models.core.sealing import SecretBox
from models.sidecars import service as sidecar_service
from models.sidecars.schema import AuthenticatedSidecar
from models.sign_in.oidc import OidcClient
from models.sign_in.tokens import verify_local_token
from models.users.schema import User
from models.users.service import authenticated_user


def get_db(request: Request) -> Iterator[Session]:
    with db_scope(request.app.state.engine) as db:
        yield db


# "function" scope closes the session (and ends its transaction) before the response is sent.
DbDep = Annotated[Session, Depends(get_db, scope="function")]

bearer = HTTPBearer(auto_error=False, description="A token from `accessgate token` or sign-in.")


def get_current_user(
    request: Request,
    db: DbDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> User:
    """The active user named by the bearer token; 401 without a valid one, 403 if inactive."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise errors.Unauthenticated("send an Authorization: Bearer <token> header")
    oidc: OidcClient | None = getattr(request.app.state, "oidc", None)
    if oidc is not None:
        sub = oidc.subject_of(credentials.credentials)
    else:
        sub = verify_local_token(key=request.app.state.secret_key, token=credentials.credentials)
    return authenticated_user(db=db, sub=sub)


CurrentUser = Annotated[User, Depends(get_current_user)]


def get_secret_box(request: Request) -> SecretBox:
    """The cipher for configuration secrets, keyed by the service's secret key."""
    secret_box: SecretBox = request.app.state.secret_box
    return secret_box


SecretBoxDep = Annotated[SecretBox, Depends(get_secret_box)]


sidecar_token = APIKeyHeader(
    name=sidecar_service.TOKEN_HEADER,
    auto_error=False,
    description="The token `POST /api/sidecars` returned for this sidecar.",
)


def get_current_sidecar(
    db: DbDep, token: Annotated[str | None, Depends(sidecar_token)]
) -> AuthenticatedSidecar:
    """The live sidecar named by the gateway-sidecar-token header; 401 otherwise."""
    return sidecar_service.authenticate_sidecar(db=db, token=token)


# Declared before any body parameter, so an unauthenticated request is refused (401) before
# its body is validated, and learns nothing from the validation.
CurrentSidecar = Annotated[AuthenticatedSidecar, Depends(get_current_sidecar)]


def get_chat(request: Request) -> ChatRuntime | None:
    """The chat bot this process runs, if it runs one."""
    chat: ChatRuntime | None = getattr(request.app.state, "chat", None)
    return chat


ChatDep = Annotated[ChatRuntime | None, Depends(get_chat)]
