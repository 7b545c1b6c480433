"""Running a policy's serve command: the one place agent-salon starts a project's own
program to answer a request from another project (bus.policy decides that it runs and
with which arguments; this runs it and says how it went).

How it runs, and why:

* The program is resolved first (bus.services.requests.program_path): a bare name on the
  serving PATH, or a path inside the project with its links followed. One outside the
  project, missing, or not executable does not start.
* In the project's root, never through a shell (the arguments go to the program as they
  are), with stdin at end of file, and only the environment bus.policy.serve_environment
  gives (PATH, HOME, LANG, AGENT_SALON_ASK, AGENT_SALON_ASKER): nothing of the server's
  own — its secret, DATABASE_URL, tokens — reaches the command.
* In a session (and process group) of its own, so that everything it starts can be ended
  with it: on a timeout, on too much output, and once it has exited (a child it left
  behind never outlives the serve).
* stdout is the answer, read as it comes and never beyond the cap (16 KiB): one byte more
  ends the command. stderr is dropped: a failure releases nothing, not even a message.
* The command is done when its stdout ends and it has exited: a child that keeps the
  pipe open is waited for too, within the same timeout.
* It succeeds only with exit status 0 and some output, decoded as UTF-8 (a byte that is
  not text, and a NUL, becomes U+FFFD). Anything else — a non-zero exit, a signal, a
  timeout, too much output, nothing printed — is a failure whose reason says which, and
  the request falls to a person.

Never call it inside a database transaction: it waits for a process, up to the timeout.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections import namedtuple
from collections.abc import Mapping, Sequence

from bus import policy
from bus.rules import RuleError
from bus.services.requests import program_path

OK, FAILED, TIMED_OUT = "ok", "failed", "timed out"
_READ_CHUNK = 64 * 1024


class Served(namedtuple("Served", "status output reason seconds")):
    """How a serve went: ok / failed / timed out; the output (the answer, only when ok);
    the reason (when not ok: what went wrong, without any of the output); how long it
    took, in seconds."""

    __slots__ = ()

    @property
    def ok(self) -> bool:
        return self.status == OK


def serve(
    argv: Sequence[str],
    *,
    root: str,
    key: str,
    asker: str,
    timeout: float,
    environ: Mapping[str, str] | None = None,
    cap: int = policy.SERVE_OUTPUT_CAP,
) -> Served:
    """Run a serve command (argv as bus.policy.evaluate filled it) in the project at
    `root` for the request with ask key `key` from the seat `asker`."""
    started = time.monotonic()
    env = policy.serve_environment(os.environ if environ is None else environ, key=key, asker=asker)
    try:
        program = program_path(root, argv[0], env["PATH"])
    except RuleError as exc:
        return Served(FAILED, "", str(exc), 0.0)
    try:
        process = subprocess.Popen(
            list(argv),
            executable=program,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        return Served(FAILED, "", f"the command could not be started: {exc.strerror}", 0.0)
    try:
        return _finish(process, started, started + timeout, timeout, cap)
    finally:
        _end_group(process)
        process.stdout.close()


def _finish(process: subprocess.Popen, started: float, deadline: float, timeout, cap) -> Served:
    def took() -> float:
        return time.monotonic() - started

    output, ended = _read_capped(process.stdout.fileno(), deadline, cap)
    if ended == "timeout":
        return Served(TIMED_OUT, "", f"the command did not finish within {timeout} s", took())
    if ended == "overflow":
        return Served(FAILED, "", f"the command printed more than {cap} bytes", took())
    try:
        status = process.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return Served(TIMED_OUT, "", f"the command did not finish within {timeout} s", took())
    if status < 0:
        name = _signal_name(-status)
        return Served(FAILED, "", f"the command was ended by signal {name}", took())
    if status != 0:
        return Served(FAILED, "", f"the command exited with status {status}", took())
    # Entry text holds no NUL (PostgreSQL's text cannot): it reads as a byte that is not text.
    text = output.decode("utf-8", "replace").replace("\0", "\ufffd")
    if not text.strip():
        return Served(FAILED, "", "the command printed nothing", took())
    return Served(OK, text, "", took())


def _read_capped(fd: int, deadline: float, cap: int) -> tuple[bytes, str]:
    """stdout up to its end ("eof"), or until the deadline ("timeout") or until one byte
    over the cap ("overflow"); never more than cap + 1 bytes are read."""
    chunks: list[bytes] = []
    size = 0
    os.set_blocking(fd, False)
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"", "timeout"
            if not selector.select(left):
                continue
            try:
                data = os.read(fd, min(_READ_CHUNK, cap + 1 - size))
            except BlockingIOError:
                continue
            if not data:
                return b"".join(chunks), "eof"
            chunks.append(data)
            size += len(data)
            if size > cap:
                return b"", "overflow"


def _end_group(process: subprocess.Popen) -> None:
    """End the command's whole process group (itself and all it started), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
