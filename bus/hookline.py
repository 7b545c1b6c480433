"""The hook line: a hook with something to write asks a running agent-salon process.

(The same sockets carry the doorbell of processes that host no streams: see
`ring_servers`.)

A hook that must write (a stop that blocks, the once-a-minute heartbeat, session-start)
needs the ORM, and starting Django costs ~200 ms of CPU before the first query (the
Hooks section of bench/RESULTS.md). Every Claude Code session wired to the bus already
has a process with Django loaded and connected to the same store: its `salon mcp`
(stdio), or `salon serve`. Each such process listens on a Unix socket, and the hook
sends it the hook context; the process runs exactly what the hook would have run
(bus.hooks.run) and answers with the hook's output. The hook process itself never
imports Django then.

* Where: `<tmp>/agent-salon-<uid>/hooks-<store key>-<pid>.sock`, one per serving
  process. The store key is a hash of the store (the absolute SQLite path, or
  DATABASE_URL), so a hook only ever reaches a process of its own store; the pid tells
  the processes of one store apart. A hook tries them newest first.
* Who: the directory must be owned by this user and closed to everybody else (mode
  700) — on both sides, else nothing listens and nothing connects — and each socket is
  mode 600. On Linux the server also checks the caller's uid (SO_PEERCRED). Whoever can
  reach the socket can already open the store itself: the line grants nothing new.
* What is the hook's, what is the server's: the request carries everything that
  depends on the hook's own environment — its identity (agent, session, cwd), headless
  or not, its default rooms (AGENT_SALON_ROOM), the interpreter and store variables the
  printed commands must name. Everything else (the default room, the secret) is the
  store's and the server's own settings hold it.
* Failure: no socket, a refused connection (a killed server: its socket file is
  removed), or an answer saying the server did not run the hook (another store, a bad
  room name, an error that rolled back) → the hook runs through the ORM itself, as
  before. Once the request is sent and the answer does not come (ANSWER_SECONDS), the
  hook does not run a second time — the server may have committed — and prints nothing;
  nothing is lost by that: the entries stay unread, `salon wait` and the inbox show them.

This module imports only the standard library: the client half runs in the hook.
"""

from __future__ import annotations

import _thread
import contextlib
import json
import os
import socket
import sys
import zlib

CONNECT_SECONDS = 0.5
ANSWER_SECONDS = 15.0
MAX_MESSAGE_BYTES = 1 << 21
WIRE_VERSION = 1


class Unanswered(Exception):
    """The request reached a server and no answer came: do not run the hook again."""


# ---------------------------------------------------------------- where


def runtime_dir() -> str:
    from bus.claude import _runtime_dir

    return _runtime_dir()


def private(path: str) -> bool:
    """Is `path` a directory owned by this user that nobody else can enter or write?"""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    import stat

    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    )


def merged_environment() -> dict[str, str]:
    from bus.claude import _merged_environment

    return _merged_environment()


def store_of(values: dict[str, str]) -> str:
    """The store named by these settings: DATABASE_URL, or the absolute SQLite path."""
    database_url = values.get("DATABASE_URL", "").strip()
    if database_url:
        return database_url
    db = values.get("AGENT_SALON_DB", "").strip() or "./agent-salon.db"
    return os.path.realpath(os.path.expanduser(db))


def store_key(store: str) -> str:
    return f"{zlib.crc32(store.encode()):08x}"


def socket_path(store: str, pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return os.path.join(runtime_dir(), f"hooks-{store_key(store)}-{pid}.sock")


def candidates(store: str) -> list[str]:
    """The sockets of this store's serving processes, newest first."""
    directory = runtime_dir()
    if not private(directory):
        return []
    prefix = f"hooks-{store_key(store)}-"
    found = []
    with os.scandir(directory) as listing:
        for item in listing:
            if item.name.startswith(prefix) and item.name.endswith(".sock"):
                try:
                    found.append((item.stat(follow_symlinks=False).st_mtime, item.path))
                except OSError:
                    continue
    return [path for _, path in sorted(found, reverse=True)]


# ---------------------------------------------------------------- the hook's side


def _exchange(path: str, request: bytes) -> dict:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.settimeout(CONNECT_SECONDS)
        client.connect(path)  # refused / missing: the caller tries the next one
        client.settimeout(ANSWER_SECONDS)
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


def ask(ctx) -> dict | None:
    """The server's answer {"output": …, "last_seen": epoch seconds} for this hook, or None when no
    server ran it (run it through the ORM). Raises Unanswered (see the docstring)."""
    paths = candidates(ctx.store)
    if not paths:
        return None
    request = json.dumps({"v": WIRE_VERSION, "hook": ctx.to_wire()}).encode()
    for path in paths:
        try:
            answer = _exchange(path, request)
        except (ConnectionRefusedError, FileNotFoundError):
            # Its process is gone (killed: nothing removed the file). Tidy up.
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        except OSError:  # not answering at connect time: busy or wedged, try another
            continue
        if answer.get("ok"):
            return answer
        # The server did not run it (or rolled back): the next one, or the ORM, will.
    return None


def ring_servers(store: str, entry_id, seat_ids) -> int:
    """The doorbell of a process that hosts no streams (bus.doorbell): tell every running
    server of the store that `entry_id` waits for `seat_ids`. Fire and forget — a ring
    that does not arrive costs latency, never the entry (the servers' watchers poll) —
    so a `salon send` pays a connect and a write per server, nothing more."""
    request = json.dumps(
        {"v": WIRE_VERSION, "ring": {"entry": str(entry_id), "seats": sorted(seat_ids)}}
    ).encode()
    told = 0
    for path in candidates(store):
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            client.settimeout(CONNECT_SECONDS)
            client.connect(path)
            client.sendall(request)
            told += 1
        except OSError:
            continue
        finally:
            client.close()
    return told


# ---------------------------------------------------------------- the server's side


# Set by the process's database watcher (mcpgate.watcher), which knows its event loop and
# channel layer: called in the line's thread with (entry id, seat ids).
_ring_handler = None


def on_ring(handler) -> None:
    global _ring_handler
    _ring_handler = handler


class _Server:
    def __init__(self, store: str, listener: socket.socket, path: str):
        self.store, self.listener, self.path = store, listener, path

    def serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return  # closed at exit
            # One request at a time: a hook's work is a few milliseconds, and one
            # thread keeps one database connection.
            with connection:
                try:
                    connection.settimeout(ANSWER_SECONDS)
                    connection.sendall(json.dumps(self.answer(connection)).encode())
                except OSError:
                    pass

    def answer(self, connection: socket.socket) -> dict:
        if not same_user(connection):
            return {"ok": False, "error": "the caller is another user"}
        chunks, size = [], 0
        while chunk := connection.recv(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_MESSAGE_BYTES:
                return {"ok": False, "error": "the request is too large"}
        try:
            request = json.loads(b"".join(chunks))
            if request.get("v") != WIRE_VERSION:
                return {"ok": False, "error": f"wire version {request.get('v')!r}"}
            if "ring" in request:
                ring = request["ring"]
                seats = [seat for seat in ring["seats"] if isinstance(seat, int)]
                if _ring_handler is not None and seats:
                    _ring_handler(str(ring["entry"]), seats)
                return {"ok": True}
            from bus.claude import HookContext

            ctx = HookContext.from_wire(request["hook"])
        except Exception as exc:
            return {"ok": False, "error": f"unreadable request: {exc}"}
        if ctx.store != self.store:
            return {"ok": False, "error": "another store"}
        return run_here(ctx)


def run_here(ctx) -> dict:
    """Run the hook in this process, as the hook itself would have."""
    from django.db import close_old_connections

    from bus import hooks

    close_old_connections()  # a broken or expired connection is replaced, not reused
    try:
        output, last_seen = hooks.run(ctx)
    except Exception as exc:
        close_old_connections()
        # Rolled back: the hook runs it itself and records the failure if it recurs.
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "ok": True,
        "output": output,
        "last_seen": last_seen.timestamp() if last_seen else None,  # for the hook's stamp
    }


def listen_privately(path: str) -> socket.socket:
    """A Unix socket listening at `path` (replacing a stale file), mode 600."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if os.path.exists(path):
            os.unlink(path)
        previous = os.umask(0o177)
        try:
            listener.bind(path)
        finally:
            os.umask(previous)
        listener.listen(64)
    except OSError:
        listener.close()
        raise
    return listener


def same_user(connection: socket.socket) -> bool:
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True  # the private directory and the socket's mode keep others out
    import struct

    credentials = connection.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return uid in (os.getuid(), 0)


_started: _Server | None = None
_start_lock = _thread.allocate_lock()  # threading itself is only imported by a server


def own_store() -> str:
    """This process's store, spelled as bus.claude.hook_context spells a hook's."""
    from django.conf import settings

    return settings.DATABASE_URL or os.path.realpath(settings.DB_PATH)


def start(*, fork_server: bool = True) -> str | None:
    """Listen for hooks (and rings) in a daemon thread (once per process), and see that
    the store's command fork server runs; the socket's path, or None when the runtime
    directory is not private (a warning says why)."""
    global _started
    import threading

    with _start_lock:
        if _started is not None:
            return _started.path
        store = own_store()
        directory = runtime_dir()
        with contextlib.suppress(OSError):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        if not private(directory):
            print(
                f"agent-salon: warning: {directory} is not a private directory of this "
                "user (mode 700): hooks will not use this process (they still work, "
                "more slowly)",
                file=sys.stderr,
            )
            return None
        path = socket_path(store)
        try:
            listener = listen_privately(path)  # an earlier file is of a killed process
        except OSError as exc:
            print(f"agent-salon: warning: no hook line at {path}: {exc}", file=sys.stderr)
            return None
        _started = _Server(store, listener, path)
        threading.Thread(target=_started.serve, name="salon-hookline", daemon=True).start()
        if fork_server:
            # The bus commands' fork server lives as long as some server of the store does.
            from salon import forkserver

            forkserver.ensure_running(store)
        import atexit

        atexit.register(stop)
        return path


def stop() -> None:
    global _started
    with _start_lock:
        server, _started = _started, None
    if server is None:
        return
    with contextlib.suppress(OSError):
        os.unlink(server.path)
    server.listener.close()
