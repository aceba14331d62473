import uuid

from fastapi import APIRouter, Request, Response

from api.deps import (
    BearerSubject,
    CredentialsFirstRoute,
    CurrentUser,
    DbDep,
    answer_as_caller,
)
from models.core.clock import utc_now
from models.reviews.timing import ReviewTiming
from models.sessions import service as session_service
from models.sessions.schema import SessionCreate, SessionPublic

router = APIRouter(route_class=CredentialsFirstRoute, prefix="/sessions", tags=["sessions"])


@router.post("", status_code=201, response_model=SessionPublic)
async def open_session(
    session: SessionCreate, request: Request, subject: BearerSubject
) -> Response:
    """Open a session on a connection; its review is created when review is configured."""
    return await answer_as_caller(
        request,
        subject,
        lambda db, caller: session_service.open_session(
            db=db,
            owner=caller,
            request=session,
            now=utc_now(),
            timing=ReviewTiming.of(request.app.state.settings),
        ),
        status_code=201,
    )


@router.get("/{session_id}")
def get_session(session_id: uuid.UUID, db: DbDep, user: CurrentUser) -> SessionPublic:
    """One session with its review (owner or admins)."""
    return session_service.get_session(db=db, viewer=user, session_id=session_id)


@router.post("/{session_id}/exec")
def execute_session(session_id: uuid.UUID, db: DbDep, user: CurrentUser) -> SessionPublic:
    """Run the session: allowed once approved, inside its time window and before revoke_at."""
    return session_service.execute_session(db=db, actor=user, session_id=session_id, now=utc_now())
