"""Logs: one JSON object a line with ``ACCESSGATE_LOG_FORMAT=json``, text for a terminal.

Every line carries what is known of the request it belongs to: its id (``X-Request-ID`` as the
client sent it, or a new one, and returned in the response), the caller's ``sub``, the review
and the Slack envelope. Nothing logs a token, a secret or a script body: messages say what
happened, and sign-in query values are redacted from the access log (``api.server``).
"""

import logging
import re
import uuid

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUEST_ID_HEADER = "x-request-id"
# A client's own id is kept only when it is short and plain: it ends up in every log line.
USABLE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
SHARED_PROCESSORS: list[structlog.types.Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def configure_logging(log_format: str, level: str) -> None:
    """Send every logger's records (the service's, uvicorn's) through one formatter."""
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*SHARED_PROCESSORS, structlog.processors.format_exc_info],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler()
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers = []
        logger.propagate = True
    structlog.configure(
        processors=[*SHARED_PROCESSORS, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )


def request_id_of(scope: Scope) -> str:
    """The client's X-Request-ID when it is usable, else a new id."""
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER.encode():
            sent = bytes(value).decode("latin-1")
            if USABLE_REQUEST_ID.fullmatch(sent):
                return sent
            break
    return uuid.uuid4().hex


class RequestContext:
    """Binds the request id (and whatever the routes add: the caller, the review) to every log
    line of the request, and returns the id in ``X-Request-ID``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() != REQUEST_ID_HEADER.encode()
                ]
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id)
        try:
            await self.app(scope, receive, sending)
        finally:
            structlog.contextvars.clear_contextvars()
