"""The command fork server: `salon send`, `salon inbox`, … without starting Django.

A bus command spends ~200 ms of CPU importing Django and the ORM before its first
query (bench/RESULTS.md, "CLI"), and hooks and cron run them on every turn. When a
`salon serve` or `salon mcp` of the store is running, it keeps one helper process per
store and installation, the fork server, which has Django imported and the bus apps
loaded, holds no database connection, and runs nothing else. `salon COMMAND` connects
to it and hands over its argv, environment, working directory, umask and its stdin,
stdout and stderr; the fork server forks, and the child becomes the command: it reads
the settings afresh from the caller's environment (so identity, store, secret and every
AGENT_SALON_* variable are the caller's, exactly as if it had started cold), runs the
command on the caller's terminal or pipes, and reports its exit status, which the
`salon` process exits with. Ctrl-C (SIGINT), SIGTERM and SIGHUP sent to `salon` are
passed on to the child.

* Which commands: LEAN_COMMANDS of salon/cli.py except `wait` (it watches its own
  parent process, which a forked child does not have).
* Where: `<tmp>/agent-salon-<uid>/cli-<key>.sock`, key = the store (as in
  bus/hookline.py) + the Python installation (sys.prefix) + the code's directory, so a
  command never runs another installation's code. Same private-directory rule as the
  hook line: owned by this user, mode 700, else nothing listens and nothing connects.
* Lifetime: `salon serve` / `salon mcp` start one when none holds the lock file of the
  key (bus.hookline.start calls `ensure_running`); it exits by itself within
  IDLE_CHECK_SECONDS once no server of its store is left (their hook-line sockets name
  their pids).
* Failure: no fork server, or one that closes the connection before the child has
  started → the command starts cold, as before. Once the child has started, the command
  is never run a second time (it may have written): if the child dies without a status,
  `salon` exits 1 with one line on stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import sys

IDLE_CHECK_SECONDS = 5.0
CONNECT_SECONDS = 0.5
MAX_HEADER_BYTES = 1 << 20
CODE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _key(store: str) -> str:
    import zlib

    identity = f"{store}\0{os.path.realpath(sys.prefix)}\0{CODE_ROOT}"
    return f"{zlib.crc32(identity.encode()):08x}"


def socket_path(store: str) -> str:
    from bus.hookline import runtime_dir

    return os.path.join(runtime_dir(), f"cli-{_key(store)}.sock")


# ---------------------------------------------------------------- the caller's side


def _read_line(connection: socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = connection.recv(1)
        if not chunk:
            return b""
        line += chunk
    return line


def run_forked(argv: list[str]) -> int | None:
    """Run `salon ARGV` in a child of the fork server: its exit status, or None when no
    fork server took it (then run it here)."""
    from bus import hookline

    try:
        values = hookline.merged_environment()
    except Exception:
        return None  # a broken config file: the cold start says what is wrong
    path = socket_path(hookline.store_of(values))
    if not hookline.private(os.path.dirname(path)):
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.settimeout(CONNECT_SECONDS)
        try:
            connection.connect(path)
        except OSError:
            return None
        umask = os.umask(0)
        os.umask(umask)
        header = json.dumps(
            {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "umask": umask}
        ).encode()
        connection.settimeout(None)
        try:
            socket.send_fds(connection, [struct.pack("!I", len(header)) + header], [0, 1, 2])
            started = _read_line(connection)
        except OSError:
            return None
        if not started:
            return None  # refused before the child existed: nothing ran
        child = int(started)
        _pass_signals_to(child)
        status = _read_line(connection)
    finally:
        connection.close()
    if not status:
        print(f"salon {argv[0]}: the command's process ended without a status", file=sys.stderr)
        return 1
    return int(status)


def _pass_signals_to(pid: int) -> None:
    import signal

    def forward(signum, _frame):
        with contextlib.suppress(OSError):
            os.kill(pid, signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)


# ---------------------------------------------------------------- the server's side


def ensure_running(store: str) -> None:
    """Start the fork server of this store and installation unless one is running."""
    import fcntl
    import subprocess

    lock_path = socket_path(store)[: -len(".sock")] + ".lock"
    try:
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held while one runs
    except OSError:
        return
    subprocess.Popen(
        [sys.executable, "-m", "salon.forkserver"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl-C on a foreground `salon serve` is for it alone
        close_fds=True,
    )


def _servers_alive(store: str) -> bool:
    from bus import hookline

    for path in hookline.candidates(store):
        try:
            os.kill(int(path.rsplit("-", 1)[1][: -len(".sock")]), 0)
            return True
        except (ValueError, ProcessLookupError):
            continue
        except PermissionError:
            return True
    return False


def serve() -> None:
    """The fork server's main loop (`python -m salon.forkserver`)."""
    import fcntl
    import select
    import signal

    from django.conf import settings

    from bus import hookline
    from salon import cli

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")
    store = hookline.own_store()
    path = socket_path(store)
    if not hookline.private(os.path.dirname(path)):
        return
    lock = open(path[: -len(".sock")] + ".lock", "a")  # noqa: SIM115 (held for life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another one serves this key (two servers started one each at once)
    settings.INSTALLED_APPS = list(settings.CLI_APPS)
    cli._setup_lean(settings)
    from django.core.management import load_command_class

    for name in cli.FORKED_COMMANDS:  # imported once here, not in every child
        load_command_class("bus", name)
    if settings.REDIS_URL:
        # A send on PostgreSQL + Redis rings Redis after its commit (bus.doorbell): the
        # import would cost a cold child 180-300 ms, then.
        import channels.layers  # noqa: F401
        import channels_redis.core  # noqa: F401
    listener = hookline.listen_privately(path)  # we hold the lock: an earlier file is stale
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    try:
        while True:
            ready, _, _ = select.select([listener], [], [], IDLE_CHECK_SECONDS)
            if not ready:
                if not _servers_alive(store):
                    return
                continue
            connection, _ = listener.accept()
            try:
                _fork_one(connection, listener)
            except Exception:
                pass  # this caller starts cold; the fork server carries on
            finally:
                connection.close()
    finally:
        os.unlink(path)


def _fork_one(connection: socket.socket, listener: socket.socket) -> None:
    from bus.hookline import same_user

    connection.settimeout(5)
    if not same_user(connection):
        return
    data, fds, _flags, _address = socket.recv_fds(connection, 65536, 3)
    try:
        if len(fds) != 3 or len(data) < 4:
            return
        (size,) = struct.unpack("!I", data[:4])
        if size > MAX_HEADER_BYTES:
            return
        body = data[4:]
        while len(body) < size:
            chunk = connection.recv(min(65536, size - len(body)))
            if not chunk:
                return
            body += chunk
        header = json.loads(body)
        pid = os.fork()
        if pid == 0:
            listener.close()
            _child(connection, fds, header)  # never returns
    finally:
        for fd in fds:
            os.close(fd)


def _child(connection: socket.socket, fds: list[int], header: dict) -> None:
    import io
    import signal

    status = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for number, fd in enumerate(fds):
            os.dup2(fd, number)
        os.chdir(header["cwd"])
        os.umask(header["umask"])
        os.environ.clear()
        os.environ.update(header["env"])
        sys.argv = ["salon", *header["argv"]]
        # Standard streams over the caller's descriptors, buffered as a fresh start would.
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=os.isatty(1)
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        connection.settimeout(None)
        connection.sendall(f"{os.getpid()}\n".encode())
        from salon import cli

        status = cli.run_in_fork(header["argv"])
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:
        print(f"salon: internal error in the forked command: {exc!r}", file=sys.stderr)
    finally:
        with contextlib.suppress(Exception):  # an orderly goodbye to the database server
            from django.db import connections

            connections.close_all()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        with contextlib.suppress(OSError):
            connection.sendall(f"{status}\n".encode())
        os._exit(status)


if __name__ == "__main__":
    serve()
