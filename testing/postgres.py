"""A throwaway PostgreSQL cluster in a temporary directory, for tests and benchmarks.

It runs the machine's own PostgreSQL binaries (``make test`` installs them when missing) on
127.0.0.1 with durability switched off, and is removed when stopped.
"""

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg


def find_bindir() -> Path:
    """The directory holding initdb and pg_ctl, newest PostgreSQL first."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(found)
    if not candidates:
        raise RuntimeError("PostgreSQL binaries not found; `make test` installs them with apt")
    return Path(os.path.realpath(candidates[0])).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PostgresCluster:
    """initdb + pg_ctl in a temporary directory; ``url(dbname)`` gives SQLAlchemy URLs."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.base = Path(tempfile.mkdtemp(prefix="accessgate-pg-"))
        self.data = self.base / "data"
        self.port = free_port()
        # initdb refuses to run as root; run the server as the postgres (or nobody) user then.
        self.run_as: list[str] = []
        if os.geteuid() == 0:
            user = "postgres" if _user_exists("postgres") else "nobody"
            self.run_as = ["runuser", "-u", user, "--"]
            shutil.chown(self.base, user=user)
        self.base.chmod(0o700)

    def start(self) -> "PostgresCluster":
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        options = (
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.base / "server.log"),
            "-o",
            options,
            "-w",
            "start",
        )
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, dbname: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create a database (optionally copied from ``template``) and return its URL."""
        clause = f' TEMPLATE "{template}"' if template else ""
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True
        ) as connection:
            connection.execute(f'CREATE DATABASE "{name}"{clause}')
        return self.url(name)

    def _run(self, *command: str) -> None:
        result = subprocess.run(
            [*self.run_as, *command], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {result.stdout}\n{result.stderr}")


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
