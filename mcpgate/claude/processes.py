"""Which process we run under: the owning Claude Code process, whether the run is
headless, and whether the session that armed `salon wait` is still there.

Headless: AGENT_SALON_HEADLESS=1|0 forces it. Otherwise the parent process chain is
walked (/proc on Linux, `ps` elsewhere) up to the owning Claude Code process (`claude`,
or node running @anthropic-ai/claude-code): it is headless when started with `-p` /
`--print`, or when it has no controlling terminal (an SDK or CI run). With no Claude Code
process in the chain nothing says so, and an unknown case is not headless: a wrong
"headless" would leave a session that a person waits on never told anything (its Stop
hook never blocks), a wrong "interactive" costs at most one block.

Standard library only: hooks run on every turn.
"""

from __future__ import annotations

import os
from collections import namedtuple


class HookInputError(Exception):
    """The hook was called wrongly (usage, stdin that is not a JSON object, a bad flag)."""


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


def decide_headless(forced: bool | None, chain: list[Proc]) -> bool:
    """The rule of the module docstring, over plain values (unit-tested)."""
    if forced is not None:
        return forced
    owner = owning_claude(chain)
    if owner is not None:
        return print_flag(owner.argv) or not owner.tty
    return False


def is_headless(forced: bool | None = None) -> bool:
    if forced is not None:
        return forced
    return decide_headless(None, ancestors())


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
