"""Claude Code integration that runs before Django, or without it: the hook runner,
headless detection, the owning-session watch of `salon wait`, and the command lines
agent-salon writes into Claude Code's configuration.

This module imports only the standard library at import time: `salon hook …` runs on
every turn and every tool call, and most of those calls never need the ORM.

The hook runner (`run_hook`, reached from salon/cli.py before any setting is read)
-------------------------------------------------------------------------------------
* Hooks never fail a turn. Whatever goes wrong — garbage on stdin, a malformed setting,
  a store that cannot be opened, a bug — the hook prints nothing on stdout and exits 0.
  The error is recorded as one line in `agent-salon-hooks.log` in the data directory
  (the directory of AGENT_SALON_DB, where the generated secret lives too; when that
  directory does not exist or cannot be written, `<tmp>/agent-salon-<uid>/`). Claude
  Code shows a hook's stderr only in verbose mode, so stderr is not where a failure can
  be found later.
* Identity: the agent is AGENT_SALON_NAME, else the basename of the hook input's `cwd`;
  the session is the input's `session_id` (else CLAUDE_CODE_SESSION_ID).
* Fast paths (no Django): a sign of life is written at most once a minute, and a stamp
  file (`<tmp>/agent-salon-<uid>/beat-<hash>`, its mtime = the seat's last_seen) says
  when the last one was. `heartbeat` with a fresh stamp exits at once. `stop` with a
  fresh stamp on the embedded SQLite store asks the database, read-only, whether there
  is anything to nudge or a focus to ask for; only if there may be does it start Django.
  The fast path only ever concludes "nothing to do": any doubt (a missing seat, an
  unexpected schema, PostgreSQL) takes the slow path, which is authoritative.

Headless runs (`is_headless`)
-----------------------------
AGENT_SALON_HEADLESS=1|0 forces it. Otherwise the parent process chain is walked
(/proc on Linux, `ps` elsewhere) up to the owning Claude Code process (`claude`, or
node running @anthropic-ai/claude-code): it is headless when started with `-p` /
`--print`, or when it has no controlling terminal (an SDK or CI run). With no Claude
Code process in the chain, a hook without a controlling terminal is headless.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections import namedtuple

# Kept out of the import: the fast paths need none of them (each costs milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path

HOOKS = ("session-start", "stop", "heartbeat")
LOG_NAME = "agent-salon-hooks.log"
LOG_MAX_BYTES = 1 << 20
BEAT_SECONDS = 60
MAX_INPUT_BYTES = 1 << 20
SESSION_VARIABLE = "CLAUDE_CODE_SESSION_ID"

# The order in which variables are written into a command line (stable, so a re-run of
# `salon install` writes byte-identical files).
ENV_ORDER = (
    "AGENT_SALON_CONFIG",
    "AGENT_SALON_DB",
    "DATABASE_URL",
    "REDIS_URL",
    "PYTHONPATH",
    "AGENT_SALON_NAME",
    "AGENT_SALON_ROOM",
    SESSION_VARIABLE,
)


class HookInputError(Exception):
    """The hook was called wrongly (usage, stdin that is not a JSON object)."""


# ---------------------------------------------------------------- processes


# tty: has a controlling terminal; start: its start time, to tell a process from a later
# one that got the same pid.
Proc = namedtuple("Proc", "pid ppid argv tty start")


def _read_linux(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            stat = stat_file.read().decode("utf-8", "replace")
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline_file:
            cmdline = cmdline_file.read()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp session tty_nr …": comm may hold spaces and parentheses.
    fields = stat[stat.rindex(")") + 2 :].split()
    argv = tuple(a.decode("utf-8", "replace") for a in cmdline.split(b"\0") if a)
    return Proc(pid=pid, ppid=int(fields[1]), argv=argv, tty=int(fields[4]) != 0, start=fields[19])


def _read_ps(pid: int) -> Proc | None:
    import subprocess

    try:
        out = subprocess.run(
            ["ps", "-o", "ppid=", "-o", "tty=", "-o", "lstart=", "-o", "args=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=3,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    if len(out) < 8:
        return None
    # lstart is five words: "Mon Jan  1 12:00:00 2024"; args are split on blanks (enough
    # to find `claude` and `-p`).
    return Proc(
        pid=pid,
        ppid=int(out[0]),
        argv=tuple(out[7:]),
        tty=out[1] not in ("?", "??", "-"),
        start=" ".join(out[2:7]),
    )


def read_proc(pid: int) -> Proc | None:
    if pid <= 0:
        return None
    if os.path.exists("/proc/self/stat"):
        return _read_linux(pid)
    return _read_ps(pid)


def ancestors(pid: int | None = None, limit: int = 16) -> list[Proc]:
    """The parent process chain, nearest first, starting at `pid` (default: our parent)."""
    chain: list[Proc] = []
    pid = os.getppid() if pid is None else pid
    while pid > 1 and len(chain) < limit:
        proc = read_proc(pid)
        if proc is None:
            break
        chain.append(proc)
        pid = proc.ppid
    return chain


def is_claude(argv: tuple[str, ...] | list[str]) -> bool:
    """Is this the command line of Claude Code (the native binary, or node running it)?"""
    for arg in list(argv)[:2]:
        path = arg.replace("\\", "/")
        base = path.rsplit("/", 1)[-1].lower()
        if base in ("claude", "claude.exe", "claude-code") or base.startswith("claude."):
            return True
        if "/@anthropic-ai/claude-code/" in path or "/claude/versions/" in path:
            return True
    return False


def print_flag(argv: tuple[str, ...] | list[str]) -> bool:
    return any(a in ("-p", "--print") or a.startswith("--print=") for a in list(argv)[1:])


def owning_claude(chain: list[Proc]) -> Proc | None:
    return next((proc for proc in chain if is_claude(proc.argv)), None)


def has_controlling_terminal() -> bool:
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return False
    os.close(fd)
    return True


def parse_flag(value: str | None) -> bool | None:
    """AGENT_SALON_HEADLESS: 1/true/yes/on, 0/false/no/off, or unset/empty (None)."""
    text = (value or "").strip().lower()
    if not text:
        return None
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise HookInputError(f"AGENT_SALON_HEADLESS={value!r} is not a flag; use 1 or 0")


def decide_headless(forced: bool | None, chain: list[Proc], terminal: bool) -> bool:
    """The rule of the module docstring, over plain values (unit-tested)."""
    if forced is not None:
        return forced
    owner = owning_claude(chain)
    if owner is not None:
        return print_flag(owner.argv) or not owner.tty
    return not terminal


def is_headless(forced: bool | None = None) -> bool:
    if forced is not None:
        return forced
    return decide_headless(None, ancestors(), has_controlling_terminal())


class OwnerWatch:
    """`salon wait` exits when the session that armed it is gone.

    The rule: at start it notes its parent process and the owning Claude Code process
    (if there is one in the chain). It is gone when our parent changes (the parent
    died and we were re-parented, to init or to a subreaper), or when the owning Claude
    Code process no longer exists (or its pid now belongs to a later process).
    """

    def __init__(self) -> None:
        self.ppid = os.getppid()
        self.owner = owning_claude(ancestors())

    def gone(self) -> str | None:
        if os.getppid() != self.ppid:
            return f"its parent process {self.ppid} ended"
        if self.owner is not None:
            now = read_proc(self.owner.pid)
            if now is None or now.start != self.owner.start:
                return f"the Claude Code process {self.owner.pid} ended"
        return None


# ---------------------------------------------------------------- command lines


def salon_argv(*args: str, python: str | None = None) -> list[str]:
    """`python -m salon.cli ARGS`, python being the interpreter running agent-salon now
    unless given, by its absolute path (never resolved: a virtualenv's python is a
    symlink whose target would lose the virtualenv)."""
    return [python or os.path.abspath(sys.executable), "-m", "salon.cli", *args]


def pythonpath_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """PYTHONPATH=<checkout> when this process found agent-salon through PYTHONPATH (a
    source checkout that is not pip-installed): the commands would not find it otherwise."""
    from pathlib import Path

    environ = os.environ if environ is None else environ
    root = Path(__file__).resolve().parent.parent
    for entry in environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and Path(entry).expanduser().resolve() == root:
            return {"PYTHONPATH": str(root)}
    return {}


def store_env(
    *,
    database_url: str,
    redis_url: str,
    db_path: Path | str,
    environ: dict[str, str] | None = None,
) -> dict[str, str]:
    """The variables that name this store, for a command run by Claude Code elsewhere.

    AGENT_SALON_CONFIG (absolute) when one is in use, and then only the store variables
    set in the environment itself (a password kept in the config file stays there);
    else DATABASE_URL / REDIS_URL. Always the absolute AGENT_SALON_DB: even with
    DATABASE_URL it names the data directory, where the generated secret that signs and
    verifies entries lives (a command started elsewhere would otherwise look for it in
    its own working directory). AGENT_SALON_SECRET is never written into a command line.
    """
    from pathlib import Path

    environ = os.environ if environ is None else environ
    env: dict[str, str] = {}
    config = environ.get("AGENT_SALON_CONFIG", "").strip()
    if config:
        env["AGENT_SALON_CONFIG"] = str(Path(config).expanduser().resolve())
    env["AGENT_SALON_DB"] = str(Path(db_path).expanduser().resolve())
    if database_url and (not config or environ.get("DATABASE_URL")):
        env["DATABASE_URL"] = database_url
    if redis_url and (not config or environ.get("REDIS_URL")):
        env["REDIS_URL"] = redis_url
    return env


def ordered(env: dict[str, str]) -> list[tuple[str, str]]:
    rank = {name: i for i, name in enumerate(ENV_ORDER)}
    return sorted(env.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))


def shell_command(env: dict[str, str], argv: list[str]) -> str:
    """`VAR=value … argv` for a POSIX shell, every piece quoted."""
    import shlex

    words = [f"{name}={shlex.quote(value)}" for name, value in ordered(env) if value]
    return " ".join(words + [shlex.quote(arg) for arg in argv])


# ---------------------------------------------------------------- heartbeat stamps


def _runtime_dir() -> str:
    """`<tmp>/agent-salon-<uid>` (TMPDIR, TEMP or TMP if it is a directory, else /tmp)."""
    base = next(
        (
            d
            for d in (os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP"))
            if d and os.path.isdir(d)
        ),
        "/tmp",
    )
    return os.path.join(base, f"agent-salon-{getattr(os, 'getuid', lambda: 0)()}")


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)[:48]


def beat_stamp(store: str, agent: str, session: str) -> str:
    import zlib

    key = zlib.crc32(f"{store}\0{agent}\0{session}".encode())
    return os.path.join(_runtime_dir(), f"beat-{key:08x}-{_safe(agent)}-{_safe(session)}")


def stamp_fresh(path: str, seconds: float = BEAT_SECONDS) -> bool:
    try:
        return time.time() - os.stat(path).st_mtime < seconds
    except OSError:
        return False


def write_stamp(path: str, when: datetime | float | None) -> None:
    """Record the seat's last_seen (a datetime, or seconds since the epoch) as the
    stamp's mtime (best effort)."""
    if when is None:
        return
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "a"):
            pass
        moment = when if isinstance(when, float) else when.timestamp()
        os.utime(path, (moment, moment))
    except OSError:
        pass


# ---------------------------------------------------------------- the hook runner


class HookContext:
    """Who the hook speaks for, and where the store is (store: DATABASE_URL, or the
    absolute SQLite path, which is then also sqlite_path).

    What depends on the hook's own environment and not on the store is filled in by
    `prepare` once the fast path is ruled out: `rooms` (AGENT_SALON_ROOM), `store_env`
    (the variables a printed command needs to reach this store) and `python` (the
    interpreter those commands run). The whole context travels over the hook line
    (bus.hookline) as `to_wire()`.
    """

    WIRE = ("kind", "payload", "agent", "session", "cwd", "headless", "store", "sqlite_path")
    PREPARED = ("rooms", "store_env", "python")

    def __init__(self, *, kind, payload, agent, session, cwd, headless, store, sqlite_path):
        self.kind, self.payload, self.cwd, self.headless = kind, payload, cwd, headless
        self.agent: str = agent
        self.session: str | None = session
        self.store: str = store
        self.sqlite_path: str | None = sqlite_path
        self.rooms: list[str] = []
        self.store_env: dict[str, str] = {}
        self.python: str = os.path.abspath(sys.executable)

    @property
    def stamp(self) -> str:
        return beat_stamp(self.store, self.agent, self.session or "")

    def prepare(self, values: dict[str, str]) -> HookContext:
        """values: the environment merged with the config file (_merged_environment);
        store_env tells the two apart itself, from os.environ."""
        from salon.config import Settings

        self.rooms = Settings(values).items("AGENT_SALON_ROOM")
        self.store_env = store_env(
            database_url=values.get("DATABASE_URL", "").strip(),
            redis_url=values.get("REDIS_URL", "").strip(),
            db_path=values.get("AGENT_SALON_DB", "").strip() or "./agent-salon.db",
        )
        self.store_env.update(pythonpath_env())
        return self

    def to_wire(self) -> dict:
        return {name: getattr(self, name) for name in self.WIRE + self.PREPARED}

    @classmethod
    def from_wire(cls, wire: dict) -> HookContext:
        ctx = cls(**{name: wire[name] for name in cls.WIRE})
        for name in cls.PREPARED:
            setattr(ctx, name, wire[name])
        return ctx


def _merged_environment() -> dict[str, str]:
    if not os.environ.get("AGENT_SALON_CONFIG"):
        return dict(os.environ)
    from salon.config import merged_environment

    return merged_environment()


def read_payload(stream) -> dict:
    raw = stream.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise HookInputError(f"the hook input is larger than {MAX_INPUT_BYTES} bytes")
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise HookInputError(f"the hook input is not JSON ({exc}): {raw[:80]!r}") from None
    if not isinstance(payload, dict):
        raise HookInputError(f"the hook input is not a JSON object: {raw[:80]!r}")
    return payload


def hook_context(kind: str, payload: dict, environ: dict[str, str]) -> HookContext:
    cwd = payload.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        cwd = os.getcwd()
    agent = environ.get("AGENT_SALON_NAME", "").strip() or os.path.basename(cwd.rstrip("/") or "/")
    session = payload.get("session_id")
    if not isinstance(session, str) or not session.strip():
        session = environ.get(SESSION_VARIABLE, "").strip() or None
    from bus.hookline import store_of

    store = store_of(environ)
    sqlite_path = None if environ.get("DATABASE_URL", "").strip() else store
    return HookContext(
        kind=kind,
        payload=payload,
        agent=agent,
        session=session.strip() if session else None,
        cwd=cwd,
        headless=is_headless(parse_flag(environ.get("AGENT_SALON_HEADLESS"))),
        store=store,
        sqlite_path=sqlite_path,
    )


def _sqlite_nothing_to_do(ctx: HookContext) -> bool:
    """Stop, read-only and without Django: True only if this seat exists and has neither
    an entry to be nudged about nor a focus request due. Anything else → False."""
    import sqlite3

    path = ctx.sqlite_path
    if path is None or not ctx.session or not os.path.exists(path):
        return False
    uri = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    connection = sqlite3.connect(f"file:{uri}?mode=ro", uri=True, timeout=2)
    try:
        row = connection.execute(
            "SELECT s.id, s.focus_text, s.focus_asked_at FROM bus_seat s "
            "JOIN bus_agent a ON a.id = s.agent_id WHERE a.name = ? AND s.session_id = ?",
            (ctx.agent, ctx.session),
        ).fetchone()
        if row is None:
            return False
        seat_id, focus_text, focus_asked_at = row
        pending = connection.execute(
            "SELECT 1 FROM bus_wakedecision w JOIN bus_membership m "
            "ON m.seat_id = w.seat_id AND m.room_id = w.room_id "
            "WHERE w.seat_id = ? AND w.woken AND w.nudged_at IS NULL "
            "AND m.left_at IS NULL AND w.seq > m.cursor LIMIT 1",
            (seat_id,),
        ).fetchone()
        if pending:
            return False
        if focus_text or focus_asked_at is not None:
            return True
        others = connection.execute(
            "SELECT s.last_seen, s.live_until, s.signed_off_at FROM bus_membership mine "
            "JOIN bus_room r ON r.id = mine.room_id "
            "JOIN bus_membership m ON m.room_id = mine.room_id "
            "JOIN bus_seat s ON s.id = m.seat_id "
            "WHERE mine.seat_id = ? AND mine.left_at IS NULL AND r.archived_at IS NULL "
            "AND m.left_at IS NULL AND m.seat_id != ?",
            (seat_id, seat_id),
        ).fetchall()
    finally:
        connection.close()
    from datetime import UTC, datetime

    from bus import rules

    at = datetime.now(UTC)

    def moment(text):
        return datetime.fromisoformat(text).replace(tzinfo=UTC) if text else None

    for last_seen, live_until, signed_off in others:
        until = moment(live_until)
        stream_open = bool(until and until > at)
        state = rules.liveness(moment(last_seen), stream_open, at, signed_off=moment(signed_off))
        if state == rules.LIVE:
            return False
    return True


def fast_path(ctx: HookContext) -> bool:
    """True when the hook has provably nothing to write or say (see the docstring)."""
    if ctx.kind == "session-start" or not stamp_fresh(ctx.stamp):
        return False
    if ctx.kind == "heartbeat" or ctx.headless:
        return True
    try:
        return _sqlite_nothing_to_do(ctx)
    except Exception:  # the slow path decides, and records a real failure
        return False


def setup_django() -> None:
    """Django with the lean app set of the bus commands (see salon/cli.py)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")
    from django.apps import apps

    if apps.ready:
        return
    from django.conf import settings

    lean = getattr(settings, "CLI_APPS", None)
    if lean:
        settings.INSTALLED_APPS = list(lean)
    apps.populate(settings.INSTALLED_APPS)


def _log_path(environ: dict[str, str]) -> list[Path]:
    """Where to record a hook error, best first."""
    from pathlib import Path

    candidates = []
    try:
        from django.conf import settings

        if settings.configured:
            candidates.append(Path(settings.DATA_DIR) / LOG_NAME)
    except Exception:
        pass
    db = environ.get("AGENT_SALON_DB", "").strip() or "./agent-salon.db"
    with contextlib.suppress(OSError, RuntimeError):
        candidates.append(Path(db).expanduser().resolve().parent / LOG_NAME)
    candidates.append(Path(_runtime_dir()) / LOG_NAME)
    return candidates


def record_error(kind: str, exc: BaseException, ctx: HookContext | None = None) -> Path | None:
    """One line per failure in agent-salon-hooks.log; never raises."""
    try:
        from datetime import UTC, datetime
        from pathlib import Path

        environ = dict(os.environ)
        with contextlib.suppress(Exception):
            environ = _merged_environment()
        text = " ".join(str(exc).split())[:600]
        where = ""
        if ctx is not None:
            where = f" agent={ctx.agent} session={ctx.session or '-'} cwd={ctx.cwd}"
        line = (
            f"{datetime.now(UTC).isoformat(timespec='milliseconds')} salon hook "
            f"{kind or '?'}{where}: {type(exc).__name__}: {text}\n"
        )
        for path in _log_path(environ):
            try:
                if not path.parent.is_dir():
                    if path.parent != Path(_runtime_dir()):
                        continue
                    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
                    path.replace(path.with_name(path.name + ".1"))
                with path.open("a", encoding="utf-8") as log:
                    log.write(line)
                return path
            except OSError:
                continue
    except Exception:
        pass
    return None


USAGE = (
    "usage: salon hook {session-start|stop|heartbeat} — run by Claude Code with its hook "
    "JSON on stdin (salon install writes them into .claude/settings.json)"
)


def run_somewhere(ctx: HookContext):
    """The hook's work, by a running agent-salon process of this store if one answers
    (bus.hookline: no Django in this process), else through the ORM here."""
    from bus import hookline

    try:
        answer = hookline.ask(ctx)
    except hookline.Unanswered as exc:
        record_error(ctx.kind, exc, ctx)
        return None, None
    if answer is not None:
        last_seen = answer.get("last_seen")
        return answer.get("output"), last_seen if isinstance(last_seen, float) else None
    setup_django()
    from bus import hooks

    return hooks.run(ctx)


def run_hook(argv: list[str], *, stdin=None, stdout=None) -> int:
    """`salon hook KIND`: always exit status 0; stdout holds the hook's JSON or nothing."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    kind = argv[0] if argv else ""
    if argv in (["-h"], ["--help"]):
        stdout.write(USAGE + "\n")
        return 0
    ctx = None
    try:
        if len(argv) != 1 or kind not in HOOKS:
            raise HookInputError(USAGE)
        payload = read_payload(stdin)
        environ = _merged_environment()
        ctx = hook_context(kind, payload, environ)
        if fast_path(ctx):
            return 0
        ctx.prepare(environ)
        output, last_seen = run_somewhere(ctx)
        write_stamp(ctx.stamp, last_seen)
        if output:
            text = json.dumps(output, ensure_ascii=False)
            stdout.write(text + "\n")
            stdout.flush()
    except BaseException as exc:  # a hook never fails a turn
        record_error(kind, exc, ctx)
    return 0
