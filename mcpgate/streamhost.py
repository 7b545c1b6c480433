"""The daemon of a process that hosts MCP streams (salond.host.Daemon, extended):
its push path — the claimer, the keep-alive ticker, the delivery records and the outbox
(mcpgate.delivery) — and the direct push a send in this process makes to a stream here
(bus.bell.Pusher). A daemon worker (salon.asgi) and a `salon mcp` stdio server each have
one; the doorbell, the line and the companions are the daemon's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from channels.layers import get_channel_layer

from bus import bell, groupcommit
from bus.models import Seat
from mcpgate import delivery, protocol
from salond.host import Daemon


def seat_group(seat_id: int) -> str:
    """The channel-layer group of a seat's streams (and waits)."""
    return f"seat.{seat_id}"


class _Closed:
    """The stream of a seat that closed between a send's claim and its commit: its write
    fails, so the outbox records the push as a delivery error."""

    streaming = ready = False

    def __init__(self, seat_name: str) -> None:
        self.seat = Seat(name=seat_name)

    async def send_event(self, message, event_id=None) -> None:
        raise ConnectionError("the stream closed")


class StreamHost(Daemon):
    def __init__(self, *, serve_line: bool = True, run_companions: bool = False) -> None:
        super().__init__(serve_line=serve_line, run_companions=run_companions)
        self.records = delivery.DeliveryRecords()
        self.outbox = delivery.Outbox(self.records, self.calls)
        self.claimer = delivery.Claimer(self.outbox)
        # The open HTTP stream of each seat whose pushes a send in this process may claim
        # and write itself (bus.bell.Pusher): changed on the event loop, read by sends on
        # the database thread (one dict lookup each).
        self.direct: dict[int, Any] = {}
        self._just_pushed: dict[str, dict[int, Any]] = {}  # entry id → {seat: stream}
        self.ticker = delivery.KeepAliveTicker(self.claimer)
        # The MCP sends waiting on the database thread, stored in one transaction.
        self.sends = groupcommit.Calls()
        self.layer = None

    async def start(self) -> None:
        if self._started:
            return
        self.outbox.bind(asyncio.get_running_loop())
        self.layer = get_channel_layer()
        bell.add_pusher(self)
        await super().start()

    async def stop(self) -> None:
        bell.remove_pusher(self)
        await super().stop()
        await self.records.flush()

    def written_here(self, entry_id: str) -> Mapping[int, Any]:
        return self._just_pushed.pop(entry_id, MappingProxyType({}))

    # -- pushing in the send (bus.bell.Pusher) ---------------------------------------

    def pushable(self, seat_ids) -> set[int]:
        """The seats whose stream here is open and has written its replay and first claim
        (until then its pushes go through the claimer, in order)."""
        if self.loop is None or self.loop.is_closed():
            return set()
        found = set()
        for seat_id in seat_ids:
            stream = self.direct.get(seat_id)
            if stream is not None and stream.streaming and stream.ready:
                found.add(seat_id)
        return found

    def pushed(self, entry, pushes: dict[int, tuple[int, str]]) -> None:
        """On the sending thread, right after its commit: the entry's message, rendered once,
        into the outbox for each seat's stream (a stream that closed meanwhile fails its
        write there, and the push is recorded as a delivery error)."""
        message = protocol.SharedMessage(delivery.channel_message(entry))
        items, streams = [], {}
        for seat_id, (push_seq, seat_name) in pushes.items():
            stream = streams[seat_id] = self.direct.get(seat_id) or _Closed(seat_name)
            items.append((stream, [(push_seq, entry, message)], None))
        self._just_pushed[str(entry.pk)] = streams
        self.outbox.put(items)
