"""The ``accessgate`` command line."""

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy import Engine

from models.core import errors
from models.core.clock import utc_now
from models.core.db import create_db_engine, db_scope, upgrade_database
from models.core.sealing import SecretBox
from models.core.settings import Settings, get_settings, resolve_secret_key
from models.sidecars.license import LicenseSigner, license_signer, rotate_signing_key
from models.sign_in.tokens import issue_local_token
from models.users.service import default_organization, upsert_user

# Requests run in worker threads that make a dozen short database round trips each. A thread
# coming back from one waits for the GIL until the running thread is forced to yield, 5 ms by
# default: a dozen such waits dominate a request. 0.5 ms measured ~1.5x the approval throughput.
GIL_SWITCH_INTERVAL_SECONDS = 0.0005


def serve(args: argparse.Namespace) -> int:
    """Serve the API on host:port."""
    from api.app import create_app
    from api.server import serve as run_server
    from api.urls import api_base
    from bot.runtime import ChatBot

    settings = get_settings()

    def chat_bot(engine: Engine, secret_box: SecretBox) -> ChatBot:
        # The process that serves the API runs the Slack bot too; this is where they meet.
        return ChatBot(
            settings=settings,
            engine=engine,
            secret_box=secret_box,
            api_base_url=api_base(settings.public_url),
        )

    sys.setswitchinterval(GIL_SWITCH_INTERVAL_SECONDS)
    app = create_app(settings, chat_factory=chat_bot)
    run_server(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        header_timeout=settings.header_timeout_seconds,
        log_format=settings.log_format,
    )
    return 0


def token(args: argparse.Namespace) -> int:
    """Create or update a user and print one bearer token for it."""
    settings = get_settings()
    engine = create_db_engine(settings.resolved_database_url())
    upgrade_database(engine)
    groups = None if args.groups is None else [g for g in args.groups.split(",") if g.strip()]
    try:
        with db_scope(engine) as db:
            user = upsert_user(db=db, sub=args.sub, email=args.email, name=args.name, groups=groups)
    except errors.DomainError as exc:
        print(f"accessgate token: {exc.message}", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    print(
        issue_local_token(
            key=resolve_secret_key(settings),
            sub=user.sub,
            now=utc_now(),
            ttl=timedelta(seconds=args.ttl or settings.token_ttl_seconds),
        )
    )
    return 0


@contextmanager
def deployment_signer(settings: Settings) -> Iterator[tuple[Engine, SecretBox, LicenseSigner]]:
    """The database, the cipher and the signer every replica of this deployment uses."""
    engine = create_db_engine(settings.resolved_database_url())
    try:
        upgrade_database(engine)
        box = SecretBox(resolve_secret_key(settings))
        yield engine, box, license_signer(settings, engine=engine, secret_box=box)
    finally:
        engine.dispose()


def license_show(_args: argparse.Namespace) -> int:
    """Print the organization's signed license and the public key that verifies it."""
    with deployment_signer(get_settings()) as (engine, _box, signer):
        try:
            with db_scope(engine) as db:
                organization = default_organization(db)
            document = signer.license_for(
                organization_id=organization.id, organization_name=organization.name, now=utc_now()
            )
            public_key = signer.public_key_pem()
        except errors.DomainError as exc:
            print(f"accessgate license: {exc.message} ({signer.key_source})", file=sys.stderr)
            return 1
    print(json.dumps({"license": document, "public_key": public_key}, indent=2))
    return 0


def license_public_key(_args: argparse.Namespace) -> int:
    """Print the PEM public key sidecars pin with --public-key."""
    with deployment_signer(get_settings()) as (_engine, _box, signer):
        try:
            print(signer.public_key_pem(), end="")
        except errors.DomainError as exc:
            print(f"accessgate license: {exc.message} ({signer.key_source})", file=sys.stderr)
            return 1
    return 0


def license_rotate_key(_args: argparse.Namespace) -> int:
    """Give the deployment a new signing key and print its public key for sidecars to pin."""
    settings = get_settings()
    if settings.license_signing_key_file is not None:
        print(
            "accessgate license: ACCESSGATE_LICENSE_SIGNING_KEY_FILE names the key; replace "
            "that file on every replica instead",
            file=sys.stderr,
        )
        return 1
    with deployment_signer(settings) as (engine, box, signer):
        with db_scope(engine) as db:
            rotate_signing_key(db=db, secret_box=box, now=utc_now())
        print(signer.public_key_pem(), end="")
    return 0


def sidecar_handshake(args: argparse.Namespace) -> int:
    """Handshake as a sidecar, verify the license, print the configuration."""
    from api.cli import sidecar

    return sidecar.run(
        base_url=args.url, token=args.token, version=args.version, public_key_file=args.public_key
    )


def login(args: argparse.Namespace) -> int:
    """Sign in through the identity provider and keep the token."""
    from api.cli import sign_in

    return sign_in.login(api_url=args.api, open_browser=not args.no_browser)


def whoami(_args: argparse.Namespace) -> int:
    """Show the signed-in user."""
    from api.cli import sign_in

    return sign_in.whoami()


def chat_link(args: argparse.Namespace) -> int:
    """Link a Slack account to the signed-in user with the code /accessgate link gave."""
    from api.cli import sign_in

    return sign_in.link_chat_account(args.code)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="accessgate", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve_parser = commands.add_parser("serve", help="serve the API")
    serve_parser.add_argument("--host", default="127.0.0.1")
    serve_parser.add_argument("--port", type=int, default=8009)
    serve_parser.add_argument("--log-level", default="info")
    serve_parser.set_defaults(handler=serve)

    token_parser = commands.add_parser("token", help="create or update a user, print a token")
    token_parser.add_argument("--sub", required=True, help="the user's identifier")
    token_parser.add_argument("--email")
    token_parser.add_argument("--name")
    token_parser.add_argument("--groups", help="comma-separated; replaces the user's groups")
    token_parser.add_argument("--ttl", type=int, help="lifetime in seconds")
    token_parser.set_defaults(handler=token)

    login_parser = commands.add_parser("login", help="sign in through the identity provider")
    login_parser.add_argument("--api", required=True, help="the service, e.g. http://host:8009")
    login_parser.add_argument("--no-browser", action="store_true", help="only print the URL")
    login_parser.set_defaults(handler=login)
    whoami_parser = commands.add_parser("whoami", help="show the signed-in user")
    whoami_parser.set_defaults(handler=whoami)
    chat_parser = commands.add_parser("chat", help="your chat (Slack) account")
    chat_commands = chat_parser.add_subparsers(dest="chat_command", required=True)
    link_parser = chat_commands.add_parser(
        "link", help="link your Slack account with the code /accessgate link gave (after login)"
    )
    link_parser.add_argument("code", help="the one-time code")
    link_parser.set_defaults(handler=chat_link)

    license_parser = commands.add_parser("license", help="the organization's signed license")
    license_commands = license_parser.add_subparsers(dest="license_command", required=True)
    show_parser = license_commands.add_parser("show", help="print the license and public key")
    show_parser.set_defaults(handler=license_show)
    key_parser = license_commands.add_parser("public-key", help="print the PEM public key")
    key_parser.set_defaults(handler=license_public_key)
    rotate_parser = license_commands.add_parser(
        "rotate-key", help="give the deployment a new signing key, print its public key"
    )
    rotate_parser.set_defaults(handler=license_rotate_key)

    sidecar_parser = commands.add_parser("sidecar", help="act as a sidecar")
    sidecar_commands = sidecar_parser.add_subparsers(dest="sidecar_command", required=True)
    handshake_parser = sidecar_commands.add_parser(
        "handshake", help="handshake, verify the license, print the configuration"
    )
    handshake_parser.add_argument("--url", required=True, help="the API base, e.g. http://host/api")
    handshake_parser.add_argument("--token", required=True, help="the sidecar's token")
    handshake_parser.add_argument("--version", required=True, help="the version to report")
    handshake_parser.add_argument(
        "--public-key", type=Path, help="PEM file of the license signer to trust (pinning)"
    )
    handshake_parser.set_defaults(handler=sidecar_handshake)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.handler(args)
    except ValidationError as exc:
        if exc.title != Settings.__name__:
            raise
        # Settings the environment got wrong: say which and why, without a traceback.
        for error in exc.errors(include_url=False):
            setting = "ACCESSGATE_" + "_".join(str(part) for part in error["loc"]).upper()
            message = str(error["msg"]).removeprefix("Value error, ")
            print(f"accessgate: {setting}: {message}", file=sys.stderr)
        return 2
    return result
