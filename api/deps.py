"""Dependencies shared by the routes: the database session, the caller, the chat bot."""

from collections.abc import Callable, Coroutine, Iterator
from typing import Annotated, Any

import structlog
from fastapi import Depends, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from models.chat.runtime import ChatRuntime
from models.core import errors
from models.core.clock import utc_now
from models.core.db import db_scope
from models.core.sealing import SecretBox
from models.core.throttle import BEARER_TOKENS, SIDECAR_TOKENS, Throttle
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
    sub: str | None = getattr(request.state, "bearer_subject", None)
    if sub is None:  # not checked before the body (a route outside CredentialsFirstRoute)
        sub = bearer_subject(request, credentials)
    return authenticated_user(db=db, sub=sub)


def bearer_subject(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str:
    """The ``sub`` a valid bearer token names; Unauthenticated otherwise. Reads no database."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise errors.Unauthenticated("send an Authorization: Bearer <token> header")
    oidc: OidcClient | None = getattr(request.app.state, "oidc", None)
    if oidc is not None:
        return oidc.subject_of(credentials.credentials)
    return verify_local_token(key=request.app.state.secret_key, token=credentials.credentials)


CurrentUser = Annotated[User, Depends(get_current_user)]


async def get_bearer_subject(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str:
    """The ``sub`` of the caller's verified bearer token, for routes that run in one thread."""
    sub: str | None = getattr(request.state, "bearer_subject", None)
    if sub is None:  # not checked before the body (a route outside CredentialsFirstRoute)
        sub = await run_in_threadpool(bearer_subject, request, credentials)
    structlog.contextvars.bind_contextvars(user=sub)
    return sub


BearerSubject = Annotated[str, Depends(get_bearer_subject)]


async def answer_as_caller(
    request: Request,
    subject: str,
    work: Callable[[Session, User], BaseModel],
    *,
    status_code: int = 200,
) -> Response:
    """Run ``work`` for the active caller named by ``subject``; answer what it returns as JSON.

    For the hot routes (decisions, lists, new sessions): loading the caller, the work and the
    serializing all run in one worker thread, where a route taking ``DbDep`` and ``CurrentUser``
    would cross to a thread for each; and the answer, built by the service, is serialized once
    rather than validated again against the response model.
    """
    engine = request.app.state.engine

    def run() -> str:
        with db_scope(engine) as db:
            return work(db, authenticated_user(db=db, sub=subject)).model_dump_json()

    body = await run_in_threadpool(run)
    return Response(body, status_code=status_code, media_type="application/json")


def get_secret_box(request: Request) -> SecretBox:
    """The cipher for configuration secrets, keyed by the service's secret key."""
    secret_box: SecretBox = request.app.state.secret_box
    return secret_box


SecretBoxDep = Annotated[SecretBox, Depends(get_secret_box)]


def get_throttle(request: Request) -> Throttle:
    """The throttle on failed attempts, shared by every replica through the database."""
    throttle: Throttle = request.app.state.throttle
    return throttle


ThrottleDep = Annotated[Throttle, Depends(get_throttle)]


def client_address(request: Request) -> str:
    """The address the request came from (the proxy's view when uvicorn trusts the proxy)."""
    return request.client.host if request.client is not None else "unknown"


sidecar_token = APIKeyHeader(
    name=sidecar_service.TOKEN_HEADER,
    auto_error=False,
    description="The token `POST /api/sidecars` returned for this sidecar.",
)


def get_current_sidecar(
    request: Request, db: DbDep, token: Annotated[str | None, Depends(sidecar_token)]
) -> AuthenticatedSidecar:
    """The live sidecar named by the gateway-sidecar-token header; 401 otherwise."""
    sidecar: AuthenticatedSidecar | None = getattr(request.state, "sidecar", None)
    if sidecar is None:  # not checked before the body (a route outside CredentialsFirstRoute)
        sidecar = sidecar_service.authenticate_sidecar(db=db, token=token)
    return sidecar


CurrentSidecar = Annotated[AuthenticatedSidecar, Depends(get_current_sidecar)]


def get_chat(request: Request) -> ChatRuntime | None:
    """The chat bot this process runs, if it runs one."""
    chat: ChatRuntime | None = getattr(request.app.state, "chat", None)
    return chat


ChatDep = Annotated[ChatRuntime | None, Depends(get_chat)]


class CredentialsFirstRoute(APIRoute):
    """A route that checks its caller's credentials before its body is read or parsed.

    FastAPI reads and parses a JSON body before it runs the dependencies, so a route taking the
    caller as a dependency would still read a stranger's body, and answer 400 for invalid JSON
    from someone who sent no token. Here the token is verified first (a bearer token without
    the database, a sidecar token with one read) and the dependencies reuse the result.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        calls = _dependency_calls(self.dependant)
        if get_current_user in calls or get_bearer_subject in calls:
            check = _check_bearer_first
        elif get_current_sidecar in calls:
            check = _check_sidecar_first
        else:
            return handler

        async def checked_first(request: Request) -> Response:
            await check(request)
            return await handler(request)

        return checked_first


async def _check_bearer_first(request: Request) -> None:
    credentials = await bearer(request)
    if credentials is None:
        raise errors.Unauthenticated("send an Authorization: Bearer <token> header")
    throttle: Throttle = request.app.state.throttle
    address = client_address(request)
    throttle.refuse_if_blocked(BEARER_TOKENS, address=address)  # in memory: no thread needed
    try:
        if getattr(request.app.state, "oidc", None) is None:  # a signature check: no thread
            request.state.bearer_subject = bearer_subject(request, credentials)
        else:  # the provider may have to be asked
            request.state.bearer_subject = await run_in_threadpool(
                bearer_subject, request, credentials
            )
    except errors.Unauthenticated:
        await run_in_threadpool(throttle.record_failure, BEARER_TOKENS, address=address)
        raise
    structlog.contextvars.bind_contextvars(user=request.state.bearer_subject)


async def _check_sidecar_first(request: Request) -> None:
    token = await sidecar_token(request)
    if not token:
        raise errors.Unauthenticated(sidecar_service.MISSING_TOKEN)
    state, address = request.app.state, client_address(request)
    handshake = request.url.path.endswith("/sidecars/handshake")

    def authenticate() -> AuthenticatedSidecar:
        with db_scope(state.engine) as db:
            return authenticate_sidecar(
                db=db, token=token, throttle=state.throttle, address=address, handshake=handshake
            )

    request.state.sidecar = await run_in_threadpool(authenticate)
    structlog.contextvars.bind_contextvars(sidecar=request.state.sidecar.name)


def authenticate_sidecar(
    *, db: Session, token: str | None, throttle: Throttle, address: str, handshake: bool = False
) -> AuthenticatedSidecar:
    """The sidecar the token names; refused tokens are throttled per address and sidecar, and
    refused handshakes recorded (audit trail, webhook event)."""
    principal = str(sidecar_service.sidecar_id_in(token or "") or "")
    throttle.refuse_if_blocked(SIDECAR_TOKENS, address=address, principal=principal)
    try:
        return sidecar_service.authenticate_sidecar(db=db, token=token)
    except errors.Unauthenticated as refusal:
        if token:  # no token at all is a client not configured yet, not a guess
            throttle.record_failure(SIDECAR_TOKENS, address=address, principal=principal)
        if handshake:
            db.rollback()
            sidecar_service.record_refused_handshake(
                db=db, token=token, address=address, reason=str(refusal), now=utc_now()
            )
        raise


def _dependency_calls(dependant: Dependant) -> set[Callable[..., Any]]:
    calls: set[Callable[..., Any]] = set()
    pending = [dependant]
    while pending:
        current = pending.pop()
        if current.call is not None:
            calls.add(current.call)
        pending.extend(current.dependencies)
    return calls
