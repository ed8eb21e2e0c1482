"""A throwaway PostgreSQL cluster for the tests: initdb in a temp dir, a free loopback port, stopped after.

PostgreSQL refuses to run as root, so under root the cluster belongs to the `postgres` user
(`runuser`); otherwise it runs as the current user. Each test gets a fresh database in it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from tests.service.ports import free_port

_names = itertools.count(1)


def postgres_bindir() -> Path:
    """Where initdb and pg_ctl are: `pg_config --bindir`, else Debian's versioned directories."""
    pg_config = shutil.which("pg_config")
    if pg_config:
        found = Path(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip())
        if (found / "initdb").exists():
            return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    raise RuntimeError(
        "PostgreSQL's initdb was not found: install the postgresql package (apt-get install postgresql)"
    )


@dataclass
class Cluster:
    root: Path
    port: int = field(default_factory=free_port)
    bindir: Path = field(default_factory=postgres_bindir)

    def _as_owner(self, *command: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        data = self.root / "data"
        subprocess.run(
            self._as_owner(
                str(self.bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"
            ),
            check=True,
            capture_output=True,
        )
        self.start_server()

    def start_server(self) -> None:
        """Start PostgreSQL on the cluster's files and port (again, after `stop_server`)."""
        data = self.root / "data"
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        subprocess.run(
            self._as_owner(
                str(self.bindir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(self.root / "log"),
                "-o",
                options,
                "-w",
                "start",
            ),
            check=True,
            capture_output=True,
        )

    def stop_server(self) -> None:
        """Stop PostgreSQL at once, keeping its files: what a database outage looks like to clients."""
        subprocess.run(
            self._as_owner(
                str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop"
            ),
            check=False,
            capture_output=True,
        )

    def processes(self) -> list[int]:
        """The postmaster and every process it started (its backends, its writers)."""
        postmaster = int((self.root / "data" / "postmaster.pid").read_text().split()[0])
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # a process that ended meanwhile
            if int(fields[1]) == postmaster:
                children.append(int(stat.parent.name))
        return [postmaster, *children]

    def pause(self) -> None:
        """Stop every process of the server (SIGSTOP): a database that hangs, its sockets open."""
        for pid in self.processes():
            os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self.processes():
            os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        self.stop_server()
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def fresh_database(self) -> str:
        """A new, empty database; its URL."""
        name = f"queue_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def start_cluster() -> Cluster:
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="reviewer-pg-")))
    cluster.start()
    return cluster


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """One throwaway PostgreSQL cluster for the whole run; tests take fresh databases from it."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()
