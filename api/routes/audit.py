"""The audit trail (admins): a page at a time, or all of it as JSON Lines or CSV."""

import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import iterate_in_threadpool

from api.deps import CredentialsFirstRoute, CurrentUser, DbDep
from models.audit import service as audit_service
from models.audit.schema import AuditPage
from models.core import errors
from models.core.db import db_scope
from models.users.service import require_admin

router = APIRouter(route_class=CredentialsFirstRoute, prefix="/audit", tags=["audit"])


def _filter(
    since: datetime | None,
    until: datetime | None,
    actor: str | None,
    kind: str | None,
    review: uuid.UUID | None,
) -> audit_service.AuditFilter:
    for name, moment in (("since", since), ("until", until)):
        if moment is not None and moment.tzinfo is None:
            raise errors.InvalidRequest(f"{name}: give a time zone, e.g. 2026-11-23T10:00:00Z")
    return audit_service.AuditFilter(
        since=since, until=until, actor=actor, kind=kind, review_id=review
    )


Since = Annotated[datetime | None, Query(description="At or after (RFC 3339, with a zone).")]
Until = Annotated[datetime | None, Query(description="Before (RFC 3339, with a zone).")]
Actor = Annotated[str | None, Query(max_length=320, description="An e-mail, sub or name.")]
Kind = Annotated[str | None, Query(max_length=64, description="e.g. review.decided")]
Review = Annotated[uuid.UUID | None, Query(description="Acts on this review.")]


@router.get("")
def list_audit(
    db: DbDep,
    user: CurrentUser,
    since: Since = None,
    until: Until = None,
    actor: Actor = None,
    kind: Kind = None,
    review: Review = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(max_length=audit_service.MAX_CURSOR_LENGTH)] = None,
) -> AuditPage:
    """Acts newest first: `{"items": [...], "next_cursor": ...}` (admins)."""
    return audit_service.list_audit(
        db=db,
        viewer=user,
        where=_filter(since, until, actor, kind, review),
        limit=limit,
        cursor=cursor,
    )


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}, "text/csv": {}}}},
)
def export_audit(
    request: Request,
    user: CurrentUser,
    format: Literal["jsonl", "csv"] = "jsonl",
    since: Since = None,
    until: Until = None,
    actor: Actor = None,
    kind: Kind = None,
    review: Review = None,
) -> StreamingResponse:
    """Every matching act, oldest first, streamed a batch at a time (admins)."""
    require_admin(user)
    where = _filter(since, until, actor, kind, review)
    engine = request.app.state.engine
    organization_id = user.organization_id

    def lines() -> Iterator[str]:
        if format == "csv":
            yield audit_service.as_csv_line(None)
        for batch in audit_service.walk(lambda: db_scope(engine), organization_id, where):
            for event in batch:
                yield (
                    audit_service.as_csv_line(event)
                    if format == "csv"
                    else audit_service.as_jsonl(event)
                )

    media_type = "text/csv" if format == "csv" else "application/x-ndjson"
    return StreamingResponse(
        iterate_in_threadpool(lines()),
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="audit.{format}"'},
    )
