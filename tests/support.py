"""Helpers for tests that run agent-salon as real processes (CLI, hooks, daphne)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent


def stretched(seconds: float) -> float:
    """A deadline for something that will happen, stretched by how loaded the machine is
    now (the load average per core, when above 1): on a busy machine a process starts
    and answers late, and a deadline is no claim on speed (bench/ measures that). A wait
    that checks something does *not* happen only gets stricter for it."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * max(1.0, per_core)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def salon_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """An environment for real `salon` processes with a store of their own.

    Embedded default: a fresh SQLite file in data_dir. When the test run itself has
    DATABASE_URL (the PostgreSQL CI pass), a fresh PostgreSQL database instead (drop it
    with drop_store), and REDIS_URL is passed on, so real processes run on the same
    configuration as the suite.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENT_SALON_", "CLAUDE_CODE_", "DJANGO_"))
        and k not in ("DATABASE_URL", "REDIS_URL")
    }
    env["AGENT_SALON_DB"] = str(data_dir / "salon.db")
    env["PYTHONPATH"] = str(REPO)
    if os.environ.get("DATABASE_URL") and "DATABASE_URL" not in extra:
        env["DATABASE_URL"] = _fresh_postgres_database(os.environ["DATABASE_URL"])
    if os.environ.get("REDIS_URL") and "REDIS_URL" not in extra:
        env["REDIS_URL"] = os.environ["REDIS_URL"]
    env.update(extra)
    return env


def _fresh_postgres_database(url: str) -> str:
    import uuid

    import psycopg

    # The creating pid in the name: a later run drops what a killed one left behind.
    name = f"salon_t_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name


def drop_store(env: dict[str, str]) -> None:
    """Drop the PostgreSQL database salon_env made (nothing to do for SQLite)."""
    url = env.get("DATABASE_URL", "")
    name = url.rsplit("/", 1)[-1]
    if not name.startswith("salon_t_") or not os.environ.get("DATABASE_URL"):
        return
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_abandoned_stores() -> list[str]:
    """Drop the test databases of test runs that are gone (killed before their
    teardown); those of runs still going are left alone. Returns the names dropped."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        return []
    import psycopg

    dropped = []
    with psycopg.connect(url, autocommit=True) as connection:
        names = connection.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'salon\\_t\\_%'"
        ).fetchall()
        for (name,) in names:
            pid = name.split("_")[2]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            dropped.append(name)
    return dropped


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def salon_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "salon.cli", *args]


def run_salon(
    *args: str, env: dict[str, str], cwd: Path | None = None, stdin: str = "", timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run(
        salon_cmd(*args),
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=stretched(timeout),
    )


def migrate(env: dict[str, str]) -> None:
    """Bring the store of `env` up to date: a copy of a store migrated once per test run
    (a fresh store would otherwise cost a `salon migrate` process in every test)."""
    template = _migrated_template()
    if env.get("DATABASE_URL"):
        import psycopg

        name = env["DATABASE_URL"].rsplit("/", 1)[-1]
        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
            connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    else:
        shutil.copyfile(template, env["AGENT_SALON_DB"])
        os.chmod(env["AGENT_SALON_DB"], 0o600)  # as the store makes it: private


_template: list[str] = []


def _migrated_template() -> str:
    if _template:
        return _template[0]
    directory = Path(tempfile.mkdtemp(prefix="salon-template-"))
    env = salon_env(directory)
    done = run_salon("migrate", "--verbosity", "0", env=env)
    assert done.returncode == 0, done.stderr
    if env.get("DATABASE_URL"):
        _template.append(env["DATABASE_URL"].rsplit("/", 1)[-1])
        atexit.register(drop_store, env)
    else:
        _template.append(env["AGENT_SALON_DB"])
    return _template[0]


@dataclass
class Daemon:
    """A real `salon serve` process on a free loopback port."""

    env: dict[str, str]
    cwd: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    command: tuple[str, ...] = ("serve",)  # ("relay", "serve") for a relay

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> Daemon:
        return self.launch().wait_ready(timeout)

    def launch(self) -> Daemon:
        """Start the process without waiting (several daemons start side by side)."""
        self.log_path = self.cwd / f"daemon-{self.port}.log"
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            salon_cmd(*self.command, "--port", str(self.port)),
            env=self.env,
            cwd=self.cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def wait_ready(self, timeout: float = 30) -> Daemon:
        timeout = stretched(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daemon exited early:\n{self.log()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"daemon did not answer /healthz in {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(sig)
        try:
            return self.process.wait(stretched(timeout))
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(5)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


def parse_json(text: str):
    return json.loads(text)


def _postgres(env: dict[str, str]):
    """A connection to the PostgreSQL store of `env` that reads json, jsonb and uuid as
    text, as sqlite3 reads them, so one test reads either store the same way."""
    import psycopg
    from psycopg.types.string import TextLoader

    connection = psycopg.connect(env["DATABASE_URL"], autocommit=True)
    for type_name in ("json", "jsonb", "uuid"):
        connection.adapters.register_loader(type_name, TextLoader)
    return connection


def query_store(env: dict[str, str], sql: str, params: tuple = ()) -> list[tuple]:
    """Read a real process's store directly (its SQLite file or PostgreSQL database).

    Write the SQL with `?` placeholders; they are adapted for PostgreSQL.
    """
    if env.get("DATABASE_URL"):
        with _postgres(env) as connection:
            return connection.execute(sql.replace("?", "%s"), params or None).fetchall()
    import sqlite3

    with contextlib.closing(sqlite3.connect(env["AGENT_SALON_DB"])) as connection:
        return connection.execute(sql, params).fetchall()


def execute_store(env: dict[str, str], sql: str, params: tuple = ()) -> None:
    """Change a real process's store behind the bus's back (tampering, ageing rows)."""
    if env.get("DATABASE_URL"):
        with _postgres(env) as connection:
            connection.execute(sql.replace("?", "%s"), params or None)
        return
    import sqlite3

    with contextlib.closing(sqlite3.connect(env["AGENT_SALON_DB"])) as connection, connection:
        connection.execute(sql, params)


def store_tables(env: dict[str, str]) -> set[str]:
    if env.get("DATABASE_URL"):
        sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    return {row[0] for row in query_store(env, sql)}


def dump_store(env: dict[str, str]) -> list[str]:
    """Every row of every table, as text: any write shows up as a difference."""
    rows = []
    for table in sorted(store_tables(env)):
        for row in sorted(map(repr, query_store(env, f'SELECT * FROM "{table}"'))):
            rows.append(f"{table}: {row}")
    return rows


def make_staff(env: dict[str, str], password: str, username: str = "staff") -> None:
    """A superuser made the way a person makes one: `salon createsuperuser --noinput`."""
    made = run_salon(
        "createsuperuser",
        "--noinput",
        "--username",
        username,
        "--email",
        f"{username}@example.com",
        env={**env, "DJANGO_SUPERUSER_PASSWORD": password},
    )
    assert made.returncode == 0, made.stderr


def run_django_script(env: dict[str, str], code: str, cwd: Path, timeout: float = 600) -> str:
    """Run `code` in a real process with Django set up on the store of `env` (seeding),
    the store made ready first as every `salon` process makes it (its secret). The timeout
    only catches a hang: a day of seeded traffic takes minutes on a loaded machine."""
    ready = "from salon import config, store; store.prepare(config.merged_environment())\n"
    done = subprocess.run(
        [sys.executable, "-c", ready + code],
        env={**env, "DJANGO_SETTINGS_MODULE": "salon.settings"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
