"""What a daemon runs beside its streams, registered by other apps (the relay's bridge).

Each companion is an async callable, called with the daemon (salond.host.
Daemon) once it starts, returning what it started: an object with an async stop().
Apps register in their AppConfig.ready; this module imports nothing, so registering costs
a command's start-up nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Companion = Callable[[Any], Awaitable[Any]]
registered: list[Companion] = []


def add_companion(start: Companion) -> None:
    if start not in registered:
        registered.append(start)


# What a `salon serve` does once before any of its workers serves (the MCP sessions forget
# the streams a killed server left): registered the same way, called by the command.
starting: list[Callable[[], Any]] = []


def add_starting(call: Callable[[], Any]) -> None:
    if call not in starting:
        starting.append(call)


def server_starting() -> None:
    for call in list(starting):
        call()
