"""Turning errors into HTTP answers: the one table of statuses, and ``{"message": ...}`` bodies.

Routes never choose a status for a domain condition; they raise the domain error and this
module answers for it.
"""

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from models.core import errors

logger = logging.getLogger("accessgate.api")

BodyModel = TypeVar("BodyModel", bound=BaseModel)

STATUS_BY_ERROR: dict[type[errors.DomainError], int] = {
    errors.InvalidRequest: 400,
    errors.Unauthenticated: 401,
    errors.Forbidden: 403,
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.TooManyAttempts: 429,
    errors.NotConfigured: 412,
    errors.UnusableConfiguration: 422,
    errors.LicenseUnavailable: 500,
    errors.ProviderUnavailable: 502,
}


class ErrorBody(BaseModel):
    """Every error response (spec 2.7)."""

    message: str


def status_for(error: errors.DomainError) -> int:
    """The HTTP status for a domain error: the entry of its nearest listed ancestor."""
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 500


def error_response(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """``{"message": ...}`` with ``status``; ``headers`` such as ``Allow`` or ``Retry-After``."""
    # Messages may quote client input (a path segment, a name); input that is not valid Unicode
    # must not turn a refusal into a failure to encode the refusal.
    message = message.encode("utf-8", "replace").decode("utf-8")
    sent = dict(headers or {})
    if status == 401:
        sent.setdefault("WWW-Authenticate", "Bearer")
    return JSONResponse(status_code=status, content={"message": message}, headers=sent or None)


def describe_validation_error(exc: RequestValidationError, content_type: str) -> str:
    """One sentence naming each offending field, e.g. ``body.status: Input should be ...``."""
    body_not_an_object = any(tuple(error.get("loc", ())) == ("body",) for error in exc.errors())
    if body_not_an_object and "json" not in content_type:
        return "send the request body as JSON with Content-Type: application/json"
    parts = []
    for error in exc.errors():
        location = ".".join(str(item) for item in error.get("loc", ()))
        message = str(error.get("msg", "is not valid"))
        message = message.removeprefix("Value error, ")
        if error.get("type") == "json_invalid":
            return "the request body is not valid JSON"
        parts.append(f"{location}: {message}" if location else message)
    return "invalid request: " + "; ".join(parts)


def validated_body(model: type[BodyModel], raw: bytes) -> BodyModel:
    """Parse a JSON body a route read itself; invalid input becomes the usual 400."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in exc.errors(include_url=False)]
        ) from exc


def json_body_openapi(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` documenting the JSON body of a route that reads it itself."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error the ``{"message": ...}`` shape."""

    @app.exception_handler(errors.DomainError)
    async def domain_error(_request: Request, exc: errors.DomainError) -> JSONResponse:
        if isinstance(exc, errors.TooManyAttempts):
            return error_response(429, exc.message, {"Retry-After": str(exc.retry_after)})
        return error_response(status_for(exc), exc.message)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type", "")
        return error_response(400, describe_validation_error(exc, content_type))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(app, request))
        return error_response(exc.status_code, str(exc.detail), headers)

    @app.exception_handler(ClientDisconnect)
    async def client_gone(_request: Request, _exc: ClientDisconnect) -> JSONResponse:
        # The client left mid-body, or RequestLimits answered it already (413, 408): nobody is
        # listening, and nothing went wrong on our side worth an error in the log.
        return error_response(400, "the request body did not arrive whole")

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal error; the service logged the details")


def allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """Every method some route answers on this path (Starlette names only one route's)."""
    return [
        method
        for method in HTTP_METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in app.router.routes
        )
    ]


HTTP_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    **{status: {"model": ErrorBody} for status in (400, 401, 403, 404, 409)},
    408: {"model": ErrorBody, "description": "The request body did not arrive in time"},
    413: {"model": ErrorBody, "description": "The request body is larger than the limit"},
    429: {
        "model": ErrorBody,
        "description": "Too many failed attempts from this address or for this principal; "
        "wait the `Retry-After` seconds",
    },
}
"""Documents the error shape on every route in the OpenAPI description."""


def more_error_responses(descriptions: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """Document the statuses a few routes add to ERROR_RESPONSES, each with what it means."""
    return {
        status: {"model": ErrorBody, "description": description}
        for status, description in descriptions.items()
    }


def document_errors_as_sent(app: FastAPI) -> None:
    """Drop FastAPI's own 422 from the OpenAPI description: invalid input is answered 400.

    A 422 a route documents itself (an unusable plugin configuration) stays.
    """

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            for path_item in schema.get("paths", {}).values():
                for operation in path_item.values():
                    responses = operation.get("responses", {})
                    if "HTTPValidationError" in str(responses.get("422", {})):
                        del responses["422"]
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
