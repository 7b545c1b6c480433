"""Where the store lives, and making it ready on first use.

With nothing set, every project, hook, command and daemon of one user meets in the same
store: `salon.db` in the user's data directory (platformdirs: `~/.local/share/agent-salon`
on Linux). AGENT_SALON_DB names another SQLite file (an absolute path, in a directory
that exists); DATABASE_URL a PostgreSQL database, whose secret still lives in the data
directory.

`prepare()` runs before Django reads its settings (salon/cli.py, manage.py, a daphne
worker), and costs a few `stat` calls when all is in place:

* the data directory is created 0700; a new SQLite file is created 0600 before SQLite
  opens it (SQLite gives its -wal and -shm files the database's mode);
* a database, -wal, -shm or secret file that others can read is refused, with one line
  naming the file and the fix; so is a secret owned by another user;
* the secret (AGENT_SALON_SECRET, else `.agent-salon-secret` in the data directory) is
  generated once, 0600. A missing secret while the store already holds entries is
  refused, naming where it was expected: a new one would make every entry read as
  tampered;
* an SQLite store without its tables gets them: `salon migrate` runs once, under a lock,
  so two first users at once are fine (`salon serve`, which migrates at every start,
  takes the same lock: migration_lock). A PostgreSQL store needs `salon migrate` (or
  `salon serve`); its commands say so in one line.

Standard library only (and platformdirs, but on Linux), and paths as strings, not
pathlib's (with urllib.parse and ipaddress, ~4 ms of every hook and command that a server
answers): hooks call it on every turn that needs the store.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections import namedtuple
from collections.abc import Mapping

from salon.config import ConfigError

TYPE_CHECKING = False  # not typing's: every hook imports this module
if TYPE_CHECKING:
    from pathlib import Path

SECRET_NAME = ".agent-salon-secret"
DB_NAME = "salon.db"

STORE_HEADER = "X-Salon-Store"


def fingerprint(store: str) -> str:
    """A store (DATABASE_URL or the SQLite file's real path) as /healthz names it
    (STORE_HEADER): a hash, so neither the path nor a DATABASE_URL's password is shown,
    that every process of one store shares (settings.STORE_FINGERPRINT)."""
    import hashlib

    return hashlib.sha256(f"agent-salon store\0{store}".encode()).hexdigest()[:16]


def default_data_dir() -> str:
    if sys.platform.startswith("linux"):
        # platformdirs' rule on Linux (the XDG base directory spec), written out: importing
        # platformdirs.unix pulls in tempfile, shutil and lzma, ~7 ms of every hook and
        # command that runs on a server of the store (bench/RESULTS.md). A test holds it
        # equal to platformdirs'.
        base = os.environ.get("XDG_DATA_HOME", "")
        if not os.path.isabs(base):  # unset, empty or relative: the XDG default
            base = os.path.expanduser("~/.local/share")
        return os.path.join(base, "agent-salon")
    import platformdirs

    return platformdirs.user_data_dir("agent-salon", appauthor=False)


def is_default(values: Mapping[str, str], where: Location) -> bool:
    """The store a command finds with nothing set (the data directory's salon.db, no
    config file, no DATABASE_URL or REDIS_URL): a command line needs nothing to name it
    (`salon install`'s files to commit, the hooks' printed commands)."""
    return (
        not where.database_url
        and not values.get("REDIS_URL", "").strip()
        and not values.get("AGENT_SALON_CONFIG", "").strip()
        and os.path.realpath(where.db_path)
        == os.path.realpath(os.path.join(default_data_dir(), DB_NAME))
    )


class Location(namedtuple("Location", "data_dir db_path database_url secret_path")):
    """data_dir: str; db_path: the SQLite file, None with DATABASE_URL; database_url: str;
    secret_path: None when AGENT_SALON_SECRET is given. Paths are strings.

    A plain namedtuple, not a dataclass or typing's NamedTuple: every hook imports this
    module, and neither `dataclasses` nor `typing` otherwise (start-up time)."""

    __slots__ = ()

    @property
    def store(self) -> str:
        """The store's name, as salond.line keys servers by it."""
        return self.database_url or self.db_path


def locate(values: Mapping[str, str]) -> Location:
    """Where the store of these settings is; refuses a path that cannot be meant."""
    given = values.get("AGENT_SALON_DB", "").strip()
    database_url = values.get("DATABASE_URL", "").strip()
    if given:
        path = os.path.expanduser(given)
        if not os.path.isabs(path):
            raise ConfigError(
                f"AGENT_SALON_DB={given!r} is a relative path, which names another file in "
                "every directory a command runs in: give an absolute path, or leave it "
                f"unset for the shared default ({os.path.join(default_data_dir(), DB_NAME)})"
            )
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            raise ConfigError(
                f"AGENT_SALON_DB={given!r}: the directory {parent} does not exist; "
                "create it, or leave AGENT_SALON_DB unset for the shared default"
            )
        db_path = os.path.realpath(path)
        data_dir = os.path.dirname(db_path)
    else:
        data_dir = default_data_dir()
        db_path = os.path.join(data_dir, DB_NAME)
    secret_path = (
        None
        if values.get("AGENT_SALON_SECRET", "").strip()
        else os.path.join(data_dir, SECRET_NAME)
    )
    return Location(
        data_dir=data_dir,
        db_path=None if database_url else db_path,
        database_url=database_url,
        secret_path=secret_path,
    )


def prepare(values: Mapping[str, str]) -> Location:
    """Make the store of these settings ready to open (see the module docstring); its
    tables are ensure_tables'."""
    where = locate(values)
    _data_dir(where.data_dir)
    if where.db_path is not None:
        _sqlite_file(where.db_path)
    if where.secret_path is not None:
        _secret(where)
    return where


def ensure_tables(where: Location) -> None:
    """First use of an SQLite store: its tables, made once (PostgreSQL: `salon migrate`)."""
    if where.db_path is not None and not _has_tables(where.db_path):
        _migrate_once(where.db_path)


# ---------------------------------------------------------------- files and modes


def _private(path: str, info: os.stat_result, what: str) -> None:
    if info.st_uid != os.getuid():
        raise ConfigError(
            f"{what} {path} belongs to another user (uid {info.st_uid}); agent-salon uses "
            "only its own files: remove it, or point AGENT_SALON_DB elsewhere"
        )
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"{what} {path} can be read by other users (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"make it private: chmod 600 {path}"
        )


def _data_dir(path: str) -> None:
    if not os.path.exists(path):
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # whatever the umask let makedirs do


def _sqlite_file(path: str) -> None:
    with contextlib.suppress(FileExistsError):
        # A new store is an empty file of this user's, mode 600, before SQLite opens it.
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
    for name in (path, f"{path}-wal", f"{path}-shm"):
        try:
            info = os.stat(name)
        except FileNotFoundError:
            continue
        _private(name, info, "the store's file")


def _secret(where: Location) -> None:
    path = where.secret_path
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if _holds_entries(where):
            raise ConfigError(
                f"the secret that signs this store's entries is missing: expected at {path}. "
                "Put it back (from a backup: `salon backup` copies it), or set "
                "AGENT_SALON_SECRET; a new secret would make every stored entry read as "
                "tampered"
            ) from None
        _create_secret(path)
        return
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"the secret {path} is not a regular file; remove it")
    _private(path, info, "the secret")


def _create_secret(path: str) -> None:
    """Written whole to a private draft, then hard-linked into place: the link fails if
    the secret exists, so two processes starting at once agree on the first one, and
    nobody ever reads a created-but-still-empty file."""
    import secrets  # here, not at the top: once per store (~4 ms of every command's start)

    draft = os.path.join(
        os.path.dirname(path), f"{SECRET_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
    )
    descriptor = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(secrets.token_hex(32) + "\n")
    try:
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(draft)


def read_secret(values: Mapping[str, str]) -> str:
    """The store's secret, or "" when it is not there (prepare() creates it)."""
    given = values.get("AGENT_SALON_SECRET", "").strip()
    if given:
        return given
    path = locate(values).secret_path
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip()
    except FileNotFoundError:
        return ""


# ---------------------------------------------------------------- tables


def _has_tables(path: str) -> bool:
    import sqlite3  # here, not at the top: a command a server answers never opens the store

    if os.stat(path).st_size == 0:
        return False
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=20) as connection:
            row = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'bus_entry'"
            ).fetchone()
    except sqlite3.DatabaseError:
        return True  # not ours to judge here: opening it says what is wrong
    return row is not None


def _holds_entries(where: Location) -> bool:
    import sqlite3

    if where.db_path is not None:
        if not os.path.exists(where.db_path) or not _has_tables(where.db_path):
            return False
        with sqlite3.connect(f"file:{where.db_path}?mode=ro", uri=True, timeout=20) as db:
            return db.execute("SELECT 1 FROM bus_entry LIMIT 1").fetchone() is not None
    import psycopg

    try:
        with psycopg.connect(where.database_url, connect_timeout=10) as db:
            table = db.execute("SELECT to_regclass('bus_entry')").fetchone()[0]
            return bool(table) and db.execute("SELECT 1 FROM bus_entry LIMIT 1").fetchone()
    except psycopg.Error:
        return False  # unreachable: the commands that need it say so


@contextlib.contextmanager
def migration_lock(path: str | None):
    """Held while the SQLite store at `path` is migrated (None, PostgreSQL: no lock): by
    the first use of a store, and by `salon serve`, which migrates every time it starts.
    Two at once would both create the tables; the second waits for the first."""
    if path is None:
        yield
        return
    import fcntl

    flags = os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW
    descriptor = os.open(f"{path}.migrate-lock", flags, 0o600)
    with os.fdopen(descriptor, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _migrate_once(path: str) -> None:
    """`salon migrate`, in a process of its own with every app, once: the first of
    several processes arriving at once migrates, the others wait for it."""
    import subprocess  # here, not at the top: once per store (~3 ms of every start)

    with migration_lock(path):
        if _has_tables(path):
            return
        done = subprocess.run(
            [sys.executable, "-m", "salon.cli", "migrate", "--verbosity", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if done.returncode != 0:
            reason = " ".join(done.stderr.split())[-300:]
            raise ConfigError(f"could not create the store's tables in {path}: {reason}")


# ---------------------------------------------------------------- where, backup


WHERE_HELP = (
    "Say which store, secret and data directory this environment uses (every project "
    "and hook of a user meets in the same one unless told otherwise), whether its daemon "
    "(salon serve) is running, and which sessions' `salon mcp` servers are."
)


def describe(values: Mapping[str, str]) -> dict:
    """`salon where`: which store, secret and data directory these settings use, and
    which servers of the store are running (their local line answers): `servers` the
    daemons (`salon serve`), `stdio` the sessions' `salon mcp`; `otherSettings` those of
    them that run with other settings or another version, so that commands from here
    work on the store themselves. Django-free: `where` answers as fast as a hook."""
    from salon import config
    from salond import line as local

    where = locate(values)
    store_name = where.store
    key = config.settings_key(values)
    found: dict[str, list[int]] = {"daemon": [], "stdio": [], "other": []}
    for path in local.servers(store_name):
        pid = local.server_pid(path)
        said = local.hello(path, store_name, key)
        if pid is None or said is None:
            continue
        found["daemon" if said.get("kind") == "daemon" else "stdio"].append(pid)
        if not said.get("answers"):
            found["other"].append(pid)
    return {
        "store": where.database_url.split("@")[-1] if where.database_url else where.db_path,
        "engine": "postgresql" if where.database_url else "sqlite",
        "secret": where.secret_path or "AGENT_SALON_SECRET",
        "dataDir": where.data_dir,
        "servers": sorted(found["daemon"]),
        "stdio": sorted(found["stdio"]),
        "otherSettings": sorted(found["other"]),
    }


def describe_lines(found: dict) -> list[str]:
    """`salon where`'s text: the store, secret and data directory, then its servers."""
    pids = lambda ids: ", ".join(map(str, ids))  # noqa: E731
    lines = [
        f"store     {found['store']} ({found['engine']})",
        f"secret    {found['secret']}",
        f"data dir  {found['dataDir']}",
    ]
    if found["servers"]:
        lines.append(f"daemon    running (pid {pids(found['servers'])})")
    else:
        lines.append("daemon    none running")
    if found["stdio"]:
        count = len(found["stdio"])
        lines.append(
            f"sessions  {count} `salon mcp` server{'s' if count > 1 else ''} of Claude Code "
            f"sessions (pid {pids(found['stdio'])})"
        )
    if found["otherSettings"]:
        lines.append(
            f"          pid {pids(found['otherSettings'])} runs with other settings or "
            "another version: commands from here work on the store themselves"
        )
    elif not found["servers"] and not found["stdio"]:
        lines.append("          commands and hooks work on the store themselves")
    return lines


def backup(values: Mapping[str, str], target: Path) -> list[Path]:
    """A consistent copy of the store (SQLite's online backup: writers go on meanwhile),
    its secret and the relay keys, into `target` (created 0700). Returns what was written."""
    import sqlite3
    from pathlib import Path

    where = prepare(values)
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    written = []
    if where.db_path is not None:
        copy = target / DB_NAME
        if copy.exists():
            raise ConfigError(f"{copy} exists already: give an empty directory")
        os.close(os.open(copy, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
        with sqlite3.connect(where.db_path) as source, sqlite3.connect(copy) as destination:
            source.backup(destination)
        written.append(copy)
    from relay.keys import FILENAME as RELAY_KEYS

    # The private files beside the store: its secret, and this machine's relay keys.
    private = [where.secret_path, os.path.join(where.data_dir, RELAY_KEYS)]
    for source in (Path(path) for path in private if path is not None):
        if not source.is_file():
            continue
        copy = target / source.name
        descriptor = os.open(copy, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(source.read_bytes())
        written.append(copy)
    return written
