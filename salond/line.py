"""The local line: how a `salon` command or hook reaches a running server of its store.

Every process that serves a store — `salon serve` (each worker) and every `salon mcp`
stdio server — listens on a Unix socket of its own. A command or a hook that finds one
sends it ONE request and reads ONE answer, and never starts Django itself; with none
answering it does the work in-process, exactly as the server would have (the same
operation table, bus.management.ops). The same sockets carry the doorbell of processes
that host no streams (`ring`).

* Where: `<tmp>/agent-salon-<uid>/line-<store key>-<pid>.sock`. The store key is a hash
  of the store (the SQLite file's absolute path, or DATABASE_URL) only: a checkout's
  `manage.py` and the installed `salon` find the same servers. The pid tells servers
  apart; clients try them newest first. What a server answers depends on the settings
  and the version of the code, both in the request's settings key (salon.config): a
  server of other settings or another version declines, and the caller works itself.
* Who: the directory must be owned by this user and closed to everybody else (mode 700)
  on both sides, else nothing listens and nothing connects; each socket is mode 600; on
  Linux the server also checks the caller's uid (SO_PEERCRED). Whoever can reach the
  socket can already open the store itself: the line grants nothing new.
* The request: `{"v": 1, "store": …, "op": …, "args": {…}, "caller": {…}}` — the
  operation, its arguments, and who asks (agent, session, cwd, default rooms: what
  depends on the caller's own environment). Everything else is the store's and the
  server's. The answer: `{"ok": true, "result": …}`, or `{"ok": true, "refusal": …,
  "status": N}` (the bus said no: print it), or `{"ok": false, …}` (this server did not
  run it: try the next, or run it in-process).
* Waits are bounded: CONNECT_SECONDS to connect and be greeted (a server greets each
  connection it accepts with one byte before it reads anything), ANSWER_SECONDS for the
  answer. A server that does not greet in time (stopped, wedged) never got the request:
  it is skipped, and with none left the caller works on the store itself. Once a
  request is sent and no answer comes, it is not run a second time — the server may have
  committed — and the caller says so (Unanswered).

Standard library only, and no asyncio: this half runs in hooks and commands on every
turn. The servers' half is salond.host.LineServer.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import time
import zlib

WIRE_VERSION = 1
GREETING = b"+"
CONNECT_SECONDS = 0.5
ANSWER_SECONDS = 15.0
MAX_MESSAGE_BYTES = 4 << 20


class Unanswered(Exception):
    """The request reached a server and no answer came: do not run it again."""


class NotGreeted(OSError):
    """The server accepted no connection in time: it never saw the request."""


# ---------------------------------------------------------------- where


def runtime_dir() -> str:
    """`<tmp>/agent-salon-<uid>` (TMPDIR, TEMP or TMP if it is a directory, else /tmp)."""
    base = next(
        (
            d
            for d in (os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP"))
            if d and os.path.isdir(d)
        ),
        "/tmp",
    )
    return os.path.join(base, f"agent-salon-{os.getuid()}")


def private(path: str) -> bool:
    """Is `path` a directory owned by this user that nobody else can enter or write?"""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    )


def private_runtime_dir() -> str | None:
    """The runtime directory, made if missing, when it is private (another local user
    can make `<tmp>/agent-salon-<uid>` first, or a link by that name); else None, and
    nothing is written there."""
    directory = runtime_dir()
    with contextlib.suppress(OSError):
        os.makedirs(directory, mode=0o700, exist_ok=True)
    return directory if private(directory) else None


def open_for_writing(path: str, flags: int = 0) -> int:
    """A descriptor to write a file of ours: never through a link (a planted one would
    turn the write against a file of the attacker's choosing), never a FIFO or device,
    created 0600 and made 0600 if it was more open (its lines carry session ids)."""
    descriptor = os.open(
        path,
        flags | os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        0o600,
    )
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise OSError(f"{path} is not a file of this user's")
        if info.st_mode & 0o077:
            os.fchmod(descriptor, 0o600)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def store_of(values: dict[str, str], default_db: str) -> str:
    """The store named by these settings: DATABASE_URL, or the SQLite file's real path."""
    database_url = values.get("DATABASE_URL", "").strip()
    if database_url:
        return database_url
    db = values.get("AGENT_SALON_DB", "").strip() or default_db
    return os.path.realpath(os.path.expanduser(db))


def store_key(store: str) -> str:
    return f"{zlib.crc32(store.encode()):08x}"


# The longest path a Unix socket's address holds on Linux (sun_path, less its last NUL).
SOCKET_PATH_MAX = 107


def socket_path(store: str, pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return os.path.join(runtime_dir(), f"line-{store_key(store)}-{pid}.sock")


def servers(store: str) -> list[str]:
    """The sockets of this store's running servers, newest first."""
    directory = runtime_dir()
    if not private(directory):
        return []
    prefix = f"line-{store_key(store)}-"
    found = []
    with os.scandir(directory) as listing:
        for item in listing:
            if item.name.startswith(prefix) and item.name.endswith(".sock"):
                try:
                    found.append((item.stat(follow_symlinks=False).st_mtime, item.path))
                except OSError:
                    continue
    return [path for _, path in sorted(found, reverse=True)]


class ServerList:
    """servers(store), listed again only when the runtime directory changed (a server's
    socket made or removed moves its mtime) or a second has passed: a daemon rings the
    other servers of its store after every send, and listing the directory each time
    cost it an open, two reads and a stat per socket."""

    MAX_AGE = 1.0

    def __init__(self, store: str) -> None:
        self.store = store
        self._stamp: int | None = None
        self._listed_at = float("-inf")
        self._paths: list[str] = []

    def current(self) -> list[str]:
        try:
            stamp = os.stat(runtime_dir()).st_mtime_ns
        except OSError:
            return []
        now = time.monotonic()
        if stamp != self._stamp or now - self._listed_at > self.MAX_AGE:
            self._paths, self._stamp, self._listed_at = servers(self.store), stamp, now
        return self._paths


def hello(path: str, store: str, settings_key: str) -> dict | None:
    """What the server at `path` says of itself: `{"kind": "daemon" | "stdio",
    "answers": whether it answers a caller of these settings}`; None when it does not
    greet in time or answer (stopped, wedged, or of an older wire)."""
    body = json.dumps(
        {"v": WIRE_VERSION, "store": store, "op": "hello", "settings": settings_key}
    ).encode()
    try:
        answer = _exchange(path, body, CONNECT_SECONDS)
    except (OSError, Unanswered):
        return None
    result = answer.get("result") if answer.get("ok") else None
    return result if isinstance(result, dict) else None


def server_pid(path: str) -> int | None:
    try:
        return int(os.path.basename(path).rsplit("-", 1)[1][: -len(".sock")])
    except (IndexError, ValueError):
        return None


# ---------------------------------------------------------------- the client


def _exchange(path: str, request: bytes, answer_seconds: float) -> dict:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.settimeout(CONNECT_SECONDS)
        client.connect(path)  # refused / missing: the caller tries another
        try:
            greeted = client.recv(len(GREETING)) == GREETING
        except OSError:
            greeted = False
        if not greeted:  # stopped or wedged: it may hold the connection, never the request
            raise NotGreeted(f"{path}: no greeting within {CONNECT_SECONDS} s")
        client.settimeout(answer_seconds)
        try:
            client.sendall(request)
            client.shutdown(socket.SHUT_WR)
            chunks, size = [], 0
            while chunk := client.recv(65536):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_MESSAGE_BYTES:
                    raise Unanswered(f"{path}: the answer is larger than {MAX_MESSAGE_BYTES}")
        except OSError as exc:
            raise Unanswered(f"{path}: {exc}") from None
    finally:
        client.close()
    try:
        answer = json.loads(b"".join(chunks))
    except ValueError:
        raise Unanswered(f"{path}: the answer is not JSON") from None
    if not isinstance(answer, dict):
        raise Unanswered(f"{path}: the answer is not a JSON object")
    return answer


def ask(store: str, request: dict, *, answer_seconds: float = ANSWER_SECONDS) -> dict | None:
    """The answer of the first server of `store` that runs `request`, or None when none
    did (run it in-process). Raises Unanswered (see the module docstring)."""
    paths = servers(store)
    if not paths:
        return None
    body = json.dumps({"v": WIRE_VERSION, "store": store, **request}).encode()
    for path in paths:
        try:
            answer = _exchange(path, body, answer_seconds)
        except (ConnectionRefusedError, FileNotFoundError):
            # Its process is gone (killed: nothing removed the file). Tidy up.
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        except OSError:  # not accepting in time: stopped or wedged, try another
            continue
        if answer.get("ok"):
            return answer
    return None


def same_user(sock: socket.socket) -> bool:
    """Is the peer of this Unix socket this user (or root)?"""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True  # the private directory and the socket's mode keep others out
    credentials = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return uid in (os.getuid(), 0)


def ring(
    store: str,
    entry_id: str,
    seat_ids: list[int],
    *,
    skip: str | None = None,
    paths: list[str] | None = None,
) -> int:
    """Tell every running server of the store (but `skip`, the caller's own socket) that
    `entry_id` waits for `seat_ids`. Fire and forget: a ring that does not arrive costs
    latency, never the entry (the servers' listeners poll). `paths`: the servers' sockets,
    when the caller knows them (ServerList). Returns how many were told."""
    others = [path for path in (servers(store) if paths is None else paths) if path != skip]
    if not others:
        return 0
    body = json.dumps(
        {"v": WIRE_VERSION, "store": store, "ring": {"entry": entry_id, "seats": seat_ids}}
    ).encode()
    told = 0
    for path in others:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            client.settimeout(CONNECT_SECONDS)
            client.connect(path)
            if client.recv(len(GREETING)) != GREETING:
                continue  # not accepting: its listener's poll will see the entry
            client.sendall(body)
            client.shutdown(socket.SHUT_WR)
            told += 1
        except OSError:
            continue
        finally:
            client.close()
    return told


# ---------------------------------------------------------------- a command's end


class Line:
    """How a command or hook runs a request: by a running server of its store, else here.

    `store` and `settings_key` are the caller's (salon.config computes them from its
    environment); a server answers only for the same store and the same settings, so
    the output is the same either way.
    """

    def __init__(self, store: str, settings_key: str, prepare=None, default_store=False) -> None:
        self.store = store
        self.settings_key = settings_key
        self.prepare = prepare  # called before this process works on the store itself
        # The store a command with nothing set finds: a printed command need not name it.
        self.default_store = default_store

    def answer(self, request: dict) -> dict:
        try:
            answer = ask(self.store, {**request, "settings": self.settings_key})
        except Unanswered as exc:
            return {
                "ok": True,
                "status": 1,
                "refusal": (
                    f"the running server of this store took the request and did not answer "
                    f"({exc}); it may have been carried out — look before repeating it"
                ),
            }
        return answer if answer is not None else self.in_process(request)

    def in_process(self, request: dict) -> dict:
        """Django in this process (the lean app set), the same operation as a server."""
        from bus.management import lean

        if self.prepare is not None:
            self.prepare()
        lean.setup()
        from bus import bell
        from bus.management import ops

        if os.path.isabs(self.store):
            # SQLite: the servers of the store hear this process's sends over their line.
            bell.add_ringer(lambda entry_id, seats: ring(self.store, entry_id, seats))
        return ops.answer(request)
