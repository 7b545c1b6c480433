"""Asking the triage judge (bus.services.triage): AGENT_SALON_TRIAGE_CMD gets one JSON document on
stdin and answers `yes` or `no` on stdout.

The answer is "yes", "no" or "failed": a timeout, a non-zero exit, a command that cannot
be started and output that is not a clear yes or no are all "failed" — what a failure
means is the caller's rule (bus.rules.triage_verdict), never decided here.

Standard library only: the Stop hook's runner asks the judge itself, without Django, so
that a running server's database thread never waits for a model (DESIGN: no I/O inside
database_sync_to_async).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

YES, NO, FAILED = "yes", "no", "failed"
# Judges run at once: a broadcast seen by one seat is a handful of entries, not hundreds.
PARALLEL = 4
# Enough of the answer to find the word in; a judge that writes more is not answering.
MAX_ANSWER_CHARS = 2000


def parse_answer(text: str) -> str:
    """`yes` or `no` (any case, a trailing full stop allowed); anything else is FAILED."""
    words = text.strip().lower().split()
    if len(words) != 1:
        return FAILED
    word = words[0].rstrip(".!")
    return word if word in (YES, NO) else FAILED


def ask(command: list[str], document: dict, timeout: float) -> str:
    """One judgement. The judge runs in a session of its own, so a timeout ends it and
    whatever it started (a `claude -p` has children), not only the first process."""
    if not command:
        return FAILED
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return FAILED
    try:
        out, _ = process.communicate(json.dumps(document).encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(process)
        return FAILED
    except OSError:  # the judge closed its stdin early and died: no answer
        _kill(process)
        return FAILED
    if process.returncode != 0:
        return FAILED
    return parse_answer(out[:MAX_ANSWER_CHARS].decode("utf-8", "replace"))


def _kill(process: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):  # already gone
        os.killpg(process.pid, signal.SIGKILL)
    process.kill()
    process.wait()


def ask_all(command: list[str], documents: list[dict], timeout: float) -> list[str]:
    """ask() for each document, a few at a time; the answers in the documents' order."""
    if not documents:
        return []
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(documents))) as pool:
        return list(pool.map(lambda document: ask(command, document, timeout), documents))
