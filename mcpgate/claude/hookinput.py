"""The Claude Code hooks' side that runs before Django, or without it.

* The context: who the hook speaks for (AGENT_SALON_NAME, else the basename of the hook
  input's `cwd`; the input's `session_id`, else CLAUDE_CODE_SESSION_ID), headless or
  not, and the store.
* Heartbeat stamps: a sign of life is written at most once a minute, and a stamp file
  (`<tmp>/agent-salon-<uid>/beat-<hash>`, its mtime = the seat's last_seen) says when the
  last one was. `heartbeat` with a fresh stamp has nothing to do; `stop` with a fresh
  stamp on the embedded SQLite store asks the database, read-only, whether there is
  anything to tell the seat. The fast path only ever concludes "nothing to
  do": any doubt (a missing seat, an unexpected schema, PostgreSQL) takes the slow path,
  which is authoritative.
* Errors: a hook never fails a turn; a failure is one line in `agent-salon-hooks.log` in
  the data directory (the directory of the SQLite store; otherwise, or when it cannot be
  written, `<tmp>/agent-salon-<uid>/` if that directory is ours and private), mode 0600,
  never written through a link (its lines carry session ids). Claude Code shows a hook's
  stderr only in verbose mode, so stderr is not where a failure can be found later.

Standard library only: `salon hook …` runs on every turn and every tool call.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import sys
import time

from bus import strict
from mcpgate.claude.commandline import (
    SESSION_VARIABLE,
    pythonpath_env,
    salon_on_path,
    store_env,
)
from mcpgate.claude.processes import HookInputError, is_headless, parse_flag
from salond.line import open_for_writing, private_runtime_dir, runtime_dir

# Kept out of the import: the fast paths need none of them (each costs milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path

HOOKS = ("session-start", "stop", "heartbeat", "pre-edit", "session-end", "prompt-submit")
# Who runs the hooks (`salon hook KIND --client codex`): Claude Code unless said. The
# hooks' work is the same for each; what the input holds and what the output says is the
# client's (mcpgate.codex for Codex CLI, mcpgate.gemini for Gemini CLI, mcpgate.opencode
# for OpenCode's plugin).
HOOK_CLIENTS = ("claude", "codex", "gemini", "opencode")
LOG_NAME = "agent-salon-hooks.log"
LOG_MAX_BYTES = 1 << 20
BEAT_SECONDS = 60
MAX_INPUT_BYTES = 1 << 20


TRIAGE_SETTINGS = (
    "AGENT_SALON_TRIAGE_CMD",
    "AGENT_SALON_TRIAGE_TIMEOUT",
    "AGENT_SALON_TRIAGE",
    "AGENT_SALON_SAFETY_NET",
)


class HookContext:
    """Who the hook speaks for, and where the store is (store: DATABASE_URL, or the
    absolute SQLite path, which is then also sqlite_path).

    What depends on the hook's own environment and not on the store is filled in by
    `prepare` once the fast path is ruled out: `rooms` (AGENT_SALON_ROOM), `store_env`
    (the variables a printed command needs to reach this store) and `python` (the
    interpreter those commands run). The whole context travels to a running server of
    the store (salond.line) as `to_wire()`.
    """

    WIRE = ("kind", "payload", "agent", "session", "cwd", "headless", "store", "sqlite_path")
    PREPARED = ("rooms", "store_env", "python", "watched", "plain", "autoclaim", "client")

    def __init__(self, *, kind, payload, agent, session, cwd, headless, store, sqlite_path):
        self.kind, self.payload, self.cwd, self.headless = kind, payload, cwd, headless
        self.agent: str = agent
        self.session: str | None = session
        self.store: str = store
        self.sqlite_path: str | None = sqlite_path
        self.rooms: list[str] = []
        self.store_env: dict[str, str] = {}
        self.python: str = os.path.abspath(sys.executable)
        # A monitor already runs `salon wait` for the session (AGENT_SALON_WATCHED=1).
        self.watched = False
        # Printed commands are plain `salon …`, as in the files install writes to commit.
        self.plain = False
        # The safety net may have something to judge (bus.services.triage): set by hook_context.
        self.net = False
        # An edit claims its file softly (AGENT_SALON_AUTOCLAIM, on unless 0/false/no/off).
        self.autoclaim = True
        # Who runs the hook (bus.rules.CLIENTS): its seat says so.
        self.client = "claude"

    @property
    def stamp(self) -> str:
        return beat_stamp(self.store, self.agent, self.session or "")

    def prepare(self, values: dict[str, str], *, default_store: bool = False) -> HookContext:
        """values: the environment merged with the config file; store_env tells the two
        apart itself, from os.environ. default_store: the store is the one a command with
        nothing set finds (salon.store.is_default); with this installation's `salon` on
        PATH as well, a printed command is plain `salon …` and names no path of this
        machine."""
        self.rooms = [r.strip() for r in values.get("AGENT_SALON_ROOM", "").split(",") if r.strip()]
        self.watched = values.get("AGENT_SALON_WATCHED", "").strip() == "1"
        self.plain = default_store and not pythonpath_env() and salon_on_path()
        if self.plain:
            self.store_env = {}
        else:
            self.store_env = store_env(
                database_url=values.get("DATABASE_URL", "").strip(),
                redis_url=values.get("REDIS_URL", "").strip(),
                db_path=self.sqlite_path or values.get("AGENT_SALON_DB", "").strip(),
            )
            self.store_env.update(pythonpath_env())
        # The judge's settings shape what the store answers (salon.config.settings_key):
        # a printed command (the Monitor's `salon wait`) carries them along.
        for name in TRIAGE_SETTINGS:
            if values.get(name, "").strip():
                self.store_env[name] = values[name].strip()
        return self

    def to_wire(self) -> dict:
        return {name: getattr(self, name) for name in self.WIRE + self.PREPARED}

    @classmethod
    def from_wire(cls, wire: dict) -> HookContext:
        ctx = cls(**{name: wire[name] for name in cls.WIRE})
        for name in cls.PREPARED:
            if name in wire:  # a hook of an older version sends fewer
                setattr(ctx, name, wire[name])
        return ctx


def read_payload(stream) -> dict:
    """The hook's JSON input, by bus.strict's rules; bytes are read where the stream has
    them (a text stdin would refuse a stray byte before the JSON rules could)."""
    raw = getattr(stream, "buffer", stream).read(MAX_INPUT_BYTES + 1)
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    try:
        payload = strict.decode_json(raw, max_bytes=MAX_INPUT_BYTES)
    except strict.TooLarge:
        raise HookInputError(f"the hook input is larger than {MAX_INPUT_BYTES} bytes") from None
    except strict.NotJson as exc:
        raise HookInputError(f"the hook input is not JSON ({exc}): {raw[:80]!r}") from None
    if not isinstance(payload, dict):
        raise HookInputError(f"the hook input is not a JSON object: {raw[:80]!r}")
    return payload


def hook_context(
    kind: str, payload: dict, environ: dict[str, str], store: str, client: str = "claude"
) -> HookContext:
    """`store`: DATABASE_URL, or the SQLite file's absolute path (salond.line)."""
    cwd = payload.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        cwd = os.getcwd()
    if "\0" in cwd or len(cwd) > 4096:
        raise HookInputError(f"the hook input's cwd is not a directory's path: {cwd[:80]!r}")
    agent = environ.get("AGENT_SALON_NAME", "").strip() or os.path.basename(cwd.rstrip("/") or "/")
    session = payload.get("session_id")
    if not isinstance(session, str) or not session.strip():
        session = environ.get(SESSION_VARIABLE, "").strip() or None
    ctx = HookContext(
        kind=kind,
        payload=payload,
        agent=agent,
        session=session.strip() if session else None,
        cwd=cwd,
        headless=is_headless(parse_flag(environ.get("AGENT_SALON_HEADLESS"))),
        store=store,
        sqlite_path=store if os.path.isabs(store) else None,
    )
    ctx.client = client
    autoclaim = environ.get("AGENT_SALON_AUTOCLAIM", "").strip().lower()
    ctx.autoclaim = autoclaim not in ("0", "false", "no", "off")
    net_switch = environ.get("AGENT_SALON_SAFETY_NET", "").strip().lower()
    ctx.net = bool(environ.get("AGENT_SALON_TRIAGE_CMD", "").strip()) and net_switch not in (
        "0",
        "false",
        "no",
        "off",
    )
    return ctx


# ---------------------------------------------------------------- the watch


def watch_running(payload: dict) -> bool | None:
    """Does a Monitor run `salon wait` for this session? The Stop hook's input lists the
    session's in-flight background tasks (`background_tasks`: each with a `type` —
    "monitor" for the Monitor tool —, a `status` and, for a command, its `command`,
    clipped at 1000 characters). None when the input has no such list (a Claude Code
    that does not send it): then nobody can tell."""
    tasks = payload.get("background_tasks")
    if not isinstance(tasks, list):
        return None
    return any(
        isinstance(task, dict)
        and task.get("type") == "monitor"
        and task.get("status") not in ("completed", "failed", "killed", "stopped")
        and runs_salon_wait(task.get("command"))
        for task in tasks
    )


def runs_salon_wait(command) -> bool:
    """`… salon wait …` or `… -m salon.cli wait …`, whatever variables lead it."""
    if not isinstance(command, str):
        return False
    words = [word.strip("'\"") for word in command.split()]
    return any(
        word == "wait" and (before == "salon.cli" or os.path.basename(before) == "salon")
        for before, word in itertools.pairwise(words)
    )


# ---------------------------------------------------------------- heartbeat stamps


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)[:48]


def beat_stamp(store: str, agent: str, session: str) -> str:
    import zlib

    key = zlib.crc32(f"{store}\0{agent}\0{session}".encode())
    return os.path.join(runtime_dir(), f"beat-{key:08x}-{_safe(agent)}-{_safe(session)}")


def stamp_fresh(path: str, seconds: float = BEAT_SECONDS) -> bool:
    """Only a stamp of ours counts (lstat: a link planted there is no sign of life)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and time.time() - info.st_mtime < seconds


def write_stamp(path: str, when: datetime | float | None) -> None:
    """Record the seat's last_seen (a datetime, or seconds since the epoch) as the
    stamp's mtime (best effort), only in a private runtime directory and never through a
    link (salond.line.open_for_writing)."""
    if when is None or private_runtime_dir() != os.path.dirname(path):
        return
    try:
        descriptor = open_for_writing(path)
        try:
            moment = when if isinstance(when, float) else when.timestamp()
            os.utime(descriptor, (moment, moment))
        finally:
            os.close(descriptor)
    except OSError:
        pass


# ---------------------------------------------------------------- the fast path


def _sqlite_nothing_to_do(ctx: HookContext) -> bool:
    """Stop, read-only and without Django: True only if this seat exists and nothing is
    to be told to it (bus.ledger.UNTOLD, the rule the services claim by). A focus request
    never blocks on its own, so it needs no look here. Anything else → False."""
    import sqlite3

    from bus import ledger

    path = ctx.sqlite_path
    if path is None or not ctx.session or not os.path.exists(path):
        return False
    uri = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    connection = sqlite3.connect(f"file:{uri}?mode=ro", uri=True, timeout=2)
    try:
        row = connection.execute(
            "SELECT s.id FROM bus_seat s JOIN bus_agent a ON a.id = s.agent_id "
            "WHERE a.name = ? AND s.session_id = ?",
            (ctx.agent, ctx.session),
        ).fetchone()
        if row is None:
            return False
        untold = connection.execute(ledger.for_sqlite3(ledger.UNTOLD) + " LIMIT 1", row)
        if untold.fetchone() is not None:
            return False
        return not (ctx.net and _net_has_work(connection, row[0]))
    finally:
        connection.close()


def _net_has_work(connection, seat_id: int) -> bool:
    """The safety net's candidate (bus.services.triage): a seat with a focus whose newest
    unread entry has no ledger row yet."""
    from bus import ledger

    seat = connection.execute(
        "SELECT name, focus_text FROM bus_seat WHERE id = ?", (seat_id,)
    ).fetchone()
    if seat is None or not seat[1]:
        return False
    newest = connection.execute(
        ledger.for_sqlite3(ledger.NEWEST_UNREAD + ledger.NEWEST_FIRST), (seat_id, seat[0])
    ).fetchone()
    if newest is None:
        return False
    has_row = connection.execute(ledger.for_sqlite3(ledger.HAS_ROW), (newest[0], seat_id))
    return has_row.fetchone() is None


def fast_path(ctx: HookContext) -> bool:
    """True when the hook has provably nothing to write or say (see the docstring; the
    file claims' part is mcpgate.claude.claimlook)."""
    if ctx.kind == "pre-edit":
        from mcpgate.claude import claimlook

        try:
            return claimlook.nothing_to_check(ctx)
        except Exception:  # the slow path decides, and records a real failure
            return False
    if ctx.kind in ("session-start", "session-end") or not stamp_fresh(ctx.stamp):
        return False
    if ctx.kind == "heartbeat":
        from mcpgate.claude import claimlook

        try:
            return claimlook.soft_claim_fresh(ctx)
        except Exception:
            return False
    if ctx.headless:
        return True
    try:
        return _sqlite_nothing_to_do(ctx)
    except Exception:  # the slow path decides, and records a real failure
        return False


def _log_paths(store: str | None) -> list[Path]:
    """Where to record a hook error, best first: the store's data directory, else the
    runtime directory."""
    from pathlib import Path

    candidates = []
    if store and os.path.isabs(store):
        candidates.append(Path(store).parent / LOG_NAME)
    elif os.environ.get("AGENT_SALON_DB", "").strip():
        # DATABASE_URL: the data directory is still AGENT_SALON_DB's (the secret's) one
        db = Path(os.environ["AGENT_SALON_DB"].strip()).expanduser()
        if db.is_absolute():
            candidates.append(db.parent / LOG_NAME)
    candidates.append(Path(runtime_dir()) / LOG_NAME)
    return candidates


def record_error(
    kind: str, exc: BaseException, ctx: HookContext | None = None, store: str | None = None
) -> Path | None:
    """One line per failure in agent-salon-hooks.log; never raises."""
    try:
        from datetime import UTC, datetime
        from pathlib import Path

        # Every value here may come from the hook's input: escaped and clipped, so that
        # none can forge a line of its own or flood the log.
        text = strict.loggable(" ".join(str(exc).split()), 600)
        where = ""
        if ctx is not None:
            where = (
                f" agent={strict.loggable(ctx.agent, 80)}"
                f" session={strict.loggable(ctx.session or '-', 80)}"
                f" cwd={strict.loggable(ctx.cwd, 300)}"
            )
        line = (
            f"{datetime.now(UTC).isoformat(timespec='milliseconds')} salon hook "
            f"{strict.loggable(kind or '?', 32)}{where}: {type(exc).__name__}: {text}\n"
        )
        for path in _log_paths(ctx.store if ctx is not None else store):
            try:
                if path.parent == Path(runtime_dir()):
                    # Shared /tmp: only a directory of ours that nobody else can enter.
                    if private_runtime_dir() is None:
                        continue
                elif not path.parent.is_dir():
                    continue
                with contextlib.suppress(FileNotFoundError):
                    if os.lstat(path).st_size > LOG_MAX_BYTES:
                        path.replace(path.with_name(path.name + ".1"))
                descriptor = open_for_writing(str(path), os.O_APPEND)
                with os.fdopen(descriptor, "a", encoding="utf-8") as log:
                    log.write(line)
                return path
            except OSError:
                continue
    except Exception:
        pass
    return None
