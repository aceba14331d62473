"""The FastAPI application factory."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.errors import ERROR_RESPONSES, document_errors_as_sent, install_error_handlers
from api.routes import (
    connections,
    health,
    plugins,
    reviews,
    rules,
    sessions,
    sidecars,
    users,
)
from models.db import create_db_engine, upgrade_database
from models.license import license_signer
from models.sealing import SecretBox
from models.settings import Settings, get_settings, resolve_secret_key

API_PREFIX = "/api"
API_VERSION = "1.173.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app for ``settings`` (the environment's by default)."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_db_engine(settings.resolved_database_url())
        upgrade_database(engine)
        app.state.engine = engine
        app.state.secret_key = resolve_secret_key(settings)
        app.state.secret_box = SecretBox(app.state.secret_key)
        app.state.license_signer = license_signer(settings)
        yield
        engine.dispose()

    app = FastAPI(
        title="accessgate",
        version=API_VERSION,
        description="Review service for access gateways.",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=f"{API_PREFIX}/docs",
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    install_error_handlers(app)
    for router in (health, users, connections, plugins, rules, sessions, reviews, sidecars):
        app.include_router(router.router, prefix=API_PREFIX, responses=ERROR_RESPONSES)
    document_errors_as_sent(app)
    return app
