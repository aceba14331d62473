"""The FastAPI application factory."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from api import metrics
from api.errors import ERROR_RESPONSES, document_errors_as_sent, install_error_handlers
from api.housekeeping import housekeeping
from api.logs import RequestContext
from api.metrics import ClusterCollector, RequestMetrics
from api.pages import chat_link as chat_link_page
from api.pages import reviews as review_page
from api.pages import sign_in as sign_in_pages
from api.request_limits import RequestLimits
from api.routes import (
    audit,
    chat,
    connections,
    health,
    plugins,
    reviews,
    rules,
    sessions,
    sidecars,
    sign_in,
    users,
    webhooks,
)
from api.scheduling import scheduler
from api.urls import API_PREFIX
from api.webhook_sender import webhook_sender
from models.chat.runtime import ChatRuntimeFactory
from models.core.db import create_db_engine, upgrade_database
from models.core.sealing import SecretBox
from models.core.settings import Settings, get_settings, resolve_secret_key
from models.core.signals import SignalListener
from models.core.throttle import Throttle
from models.plugins.schema import PluginName
from models.plugins.service import plugin_topic
from models.reviews.timing import ReviewTiming
from models.sidecars.license import license_signer
from models.sign_in.oidc import OidcClient

API_VERSION = "1.173.0"


def create_app(
    settings: Settings | None = None, *, chat_factory: ChatRuntimeFactory | None = None
) -> FastAPI:
    """Build the app for ``settings`` (the environment's by default).

    ``chat_factory`` builds the chat bot this process runs alongside the API, if any.
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_db_engine(settings.resolved_database_url())
        upgrade_database(engine)
        app.state.engine = engine
        app.state.secret_key = resolve_secret_key(settings)
        app.state.secret_box = SecretBox(app.state.secret_key)
        app.state.throttle = Throttle(engine)
        app.state.license_signer = license_signer(
            settings, engine=engine, secret_box=app.state.secret_box
        )
        app.state.oidc = oidc_client(settings) if settings.auth == "oidc" else None
        app.state.chat = (
            None if chat_factory is None else chat_factory(engine, app.state.secret_box)
        )
        app.state.metrics_registry = CollectorRegistry(auto_describe=False)
        app.state.metrics_registry.register(ClusterCollector(engine, app.state.chat))
        signals = SignalListener(engine) if engine.dialect.name == "postgresql" else None
        if app.state.chat is not None:
            if signals is not None:  # a change made through another replica
                signals.on(plugin_topic(PluginName.CHAT), app.state.chat.configuration_changed)
            await app.state.chat.start()
        if signals is not None:
            signals.start()
        try:
            async with (
                housekeeping(engine, settings.outbox_retention),
                scheduler(engine, ReviewTiming.of(settings), settings.scheduler_interval_seconds),
                webhook_sender(engine, app.state.secret_box, settings),
            ):
                yield
        finally:
            if signals is not None:
                signals.stop()
            if app.state.chat is not None:
                await app.state.chat.stop()
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
    app.add_middleware(
        RequestLimits,
        max_body_bytes=settings.max_body_bytes,
        body_timeout_seconds=settings.body_timeout_seconds,
    )
    app.add_middleware(RequestMetrics)
    app.add_middleware(RequestContext)
    install_error_handlers(app)
    for router in (
        health,
        sign_in,
        users,
        connections,
        plugins,
        rules,
        sessions,
        reviews,
        sidecars,
        chat,
        audit,
        webhooks,
    ):
        app.include_router(router.router, prefix=API_PREFIX, responses=ERROR_RESPONSES)
    app.include_router(chat.slack_router)
    for pages in (review_page, sign_in_pages, chat_link_page):
        app.include_router(pages.router)
    app.include_router(metrics.router)
    document_errors_as_sent(app)
    return app


def oidc_client(settings: Settings) -> OidcClient:
    """The relying party for ACCESSGATE_AUTH=oidc; refuses to start half-configured."""
    missing = [
        name
        for name, value in (
            ("ACCESSGATE_OIDC_ISSUER_URL", settings.oidc_issuer_url),
            ("ACCESSGATE_OIDC_CLIENT_ID", settings.oidc_client_id),
            ("ACCESSGATE_OIDC_CLIENT_SECRET", settings.oidc_client_secret),
        )
        if not value
    ]
    if missing:
        raise RuntimeError(f"ACCESSGATE_AUTH=oidc needs {', '.join(missing)}")
    return OidcClient(
        issuer=settings.oidc_issuer_url,
        client_id=settings.oidc_client_id,
        client_secret=settings.oidc_client_secret,
        redirect_uri=f"{settings.public_url.rstrip('/')}{API_PREFIX}/callback",
        scopes=settings.oidc_scopes,
        groups_claim=settings.oidc_groups_claim,
        audience=settings.oidc_audience,
        jwks_refetch_seconds=settings.oidc_jwks_refetch_seconds,
    )
