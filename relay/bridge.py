"""The bridge: carries the bridged rooms of this store to and from the relay (docs/RELAY.md).

It runs inside the daemon (relay.apps registers `companion` with salond.companions, and the
daemon starts it with its other work), or alone as `salon relay bridge` when no daemon
runs. Per bridged room, one RoomLink:

* push: after an entry of the room commits here (bus.signals.entry_stored rings it), and
  at least every PUSH_POLL_SECONDS for entries other processes committed, it seals what
  is past the room's `pushed_seq` and sends it; `pushed_seq` moves only once the relay
  has answered, so a relay or bridge restart re-sends, and the relay drops what it
  already holds by entry id;
* pull: a long poll (≤ 25 s) from the room's relay cursor; what arrives is opened and
  landed through bus.services, then the cursor moves; after a restart the pull resumes
  from the stored cursor, and an entry that landed before the crash is dropped by id;
* the roster: when nothing waits to be pushed, every few seconds, it looks whether the
  room's local seats or their liveness changed (or five minutes passed while one is
  live) and sends them (relay.envelope), so the other machines know who is here;
* a lease in the room's row, so that one bridge of the store carries it at a time.

Which rooms: those the keys file (relay.keys) names and this store has; the file is
looked at every RELOAD_SECONDS, so a `salon join` is picked up by a running daemon.
Failures are retried with a growing pause (at most MAX_BACKOFF_SECONDS) and shown in
`salon rooms` and `salon relay status` (the room's last error) until a push and a pull
have both succeeded after them (relay.state); with nothing to push, the roster is sent
again to prove a push.

The relay's rate (entries a device may push a minute) paces the push, never wedges it:
every push answer says how much of the window is left (`rateLeft`, `rateResetIn`), and a
429 how many would fit now and when the window starts again (`Retry-After`). The next
batch is at most what fits; when nothing fits, the bridge waits for the new window. A
backlog far larger than one window goes out in windowfuls, in order, each entry once.

`sync_once` is `salon relay sync`: one push of everything waiting and one pull of
everything there, then it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
from pathlib import Path

from django.utils import timezone

from bus import bell, signals
from bus.ids import uuid7
from patches.asgiref import on_database_thread
from relay import client, envelope, keys, state

log = logging.getLogger("salon.relay")

PUSH_POLL_SECONDS = 1.0
ROSTER_CHECK_SECONDS = 3.0
RELOAD_SECONDS = 2.0
LEASE_RENEW_SECONDS = 5.0
MAX_BACKOFF_SECONDS = 5.0
MAX_RETRY_AFTER = 300.0
FULL_ROOM_SECONDS = 30.0  # a 507: space frees only as retention drops entries


class RoomLink:
    """One bridged room: its push loop, its pull loop and its lease."""

    def __init__(self, bridge: Bridge, room: str, bridged_id: int, relay: str, device: str,
                 secrets: keys.RoomKeys) -> None:  # fmt: skip
        self.bridge = bridge
        self.room = room
        self.bridged_id = bridged_id
        self.relay = relay
        self.device = device
        self.secrets = secrets
        self.kick = asyncio.Event()
        self.leased = asyncio.Event()
        self.roster_checked = float("-inf")
        self.regained = False  # the lease was (re)gained: the stored cursor is the truth
        self.tasks: list[asyncio.Task] = []
        # Entries the next push may carry: what is left of the relay's rate window.
        self.batch_limit = state.PUSH_BATCH
        self.rate = state.PUSH_BATCH  # the relay's rate a minute, once it said it
        # An error is shown: the next idle push sends the roster, to prove a push works.
        self.unproven = False

    def start(self) -> None:
        self.tasks = [
            asyncio.ensure_future(self._lease()),
            asyncio.ensure_future(self._push_loop()),
            asyncio.ensure_future(self._pull_loop()),
        ]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await on_database_thread(state.release_lease, self.bridged_id, self.bridge.holder)

    # -- the lease ------------------------------------------------------------------

    async def _lease(self) -> None:
        while True:
            try:
                held = await on_database_thread(
                    state.claim_lease, self.bridged_id, self.bridge.holder
                )
            except Exception:
                log.exception("the lease of room %s could not be renewed", self.room)
                held = False
            if held:
                if not self.leased.is_set():
                    self.kick.set()  # push what waited while another bridge held it
                    self.regained = True  # and read on from where that bridge got to
                self.leased.set()
            else:
                self.leased.clear()
            await asyncio.sleep(LEASE_RENEW_SECONDS)

    # -- push -----------------------------------------------------------------------

    async def _push_loop(self) -> None:
        backoff = 0.0
        while True:
            await self.leased.wait()
            try:
                pause = await self.push_once()
                backoff = 0.0
            except client.RelayError as exc:
                backoff = await self._failed("push", exc, backoff)
                continue
            except Exception as exc:
                log.exception("pushing room %s failed", self.room)
                backoff = await self._failed("push", exc, backoff)
                continue
            if pause is None:
                await bell.rung_within(self.kick, PUSH_POLL_SECONDS)
                self.kick.clear()
            elif pause > 0:
                await self.bridge.sleep(pause)

    async def push_once(self) -> float | None:
        """Push the next batch that fits the relay's rate window (or, with nothing to
        push, the roster when it is due). None: nothing more to push now; 0: more right
        away; else the seconds until the relay's window lets more in."""
        batch, start, reached = await on_database_thread(
            state.pending, self.bridged_id, self.batch_limit
        )
        if not batch:
            if reached > start:  # only entries that landed from the relay: pass them
                await on_database_thread(state.mark_pushed, self.bridged_id, reached, 0)
            await self.push_roster()
            return None
        rejected = 0
        while batch:
            sealed = [
                envelope.seal_entry(self.secrets.key, device=self.device, **entry)
                for entry in batch
            ]
            try:
                answer = await client.push(
                    self.bridge.http, self.relay, self.room, self.secrets.token, sealed
                )
                break
            except client.RelayError as exc:
                if exc.status == 429:
                    return await self._rate_limited(exc)
                if exc.status == 507:
                    return await self._room_full(exc, len(batch))
                too_big = exc.status == 413 and exc.extra.get("id")
                if not too_big:
                    raise
                # The relay will never take this one: leave it here, carry the rest.
                log.warning("room %s: the relay refused entry %s: %s", self.room,
                            exc.extra["id"], exc.message)  # fmt: skip
                batch = [e for e in batch if str(e["id"]) != exc.extra["id"]]
                rejected += 1
        else:
            answer = {}
        await on_database_thread(state.mark_pushed, self.bridged_id, reached, len(batch), rejected)
        self.unproven = False
        return self._heed_rate(answer)

    def _heed_rate(self, said: dict) -> float:
        """What the relay said of its rate window: the next batch is what is left of it,
        and when nothing is left, the pause until the next window."""
        rate, left, reset = said.get("rate"), said.get("rateLeft"), said.get("rateResetIn")
        if _whole(rate) and rate > 0:
            self.rate = min(state.PUSH_BATCH, rate)
        if not _whole(left):
            self.batch_limit = self.rate
            return 0.0
        if left > 0:
            self.batch_limit = min(self.rate, left)
            return 0.0
        self.batch_limit = self.rate  # a new window takes a whole batch
        return min(float(reset), MAX_RETRY_AFTER) if _whole(reset) and reset > 0 else 1.0

    async def _rate_limited(self, exc: client.RelayError) -> float:
        """A 429: shown as the room's error; the next batch is what fits now, or a whole
        window's worth after the Retry-After the relay gave."""
        await self._note_error("push", exc)
        fits = exc.extra.get("rateLeft")
        pause = self._heed_rate({**exc.extra, "rateResetIn": exc.extra.get("retryAfter")})
        if _whole(fits) and fits > 0:
            return 0.0
        return max(pause, 1.0)

    async def _room_full(self, exc: client.RelayError, sent: int) -> float:
        """A 507: shown as the room's error; what still fits goes at once, else the
        bridge waits for the relay's retention to free space."""
        await self._note_error("push", exc)
        entries, size = exc.extra.get("entriesLeft"), exc.extra.get("bytesLeft")
        if _whole(entries) and 0 < entries < sent:
            self.batch_limit = entries
            return 0.0
        if _whole(entries) and entries > 0 and _whole(size) and size > 0 and sent > 1:
            self.batch_limit = max(1, sent // 2)  # over the bytes: smaller batches
            return 0.0
        self.batch_limit = 1 if sent == 1 else max(1, sent // 2)
        return FULL_ROOM_SECONDS

    async def push_roster(self) -> None:
        """Send who is in the room here, when that changed (looked at every few seconds),
        or after an error (a push that shows the relay takes pushes again)."""
        clock = asyncio.get_running_loop().time()
        if clock < self.roster_checked + ROSTER_CHECK_SECONDS:
            return
        self.roster_checked = clock
        due = await on_database_thread(state.roster_due, self.bridged_id, self.unproven)
        if due is None:
            return
        seats, digest = due
        sealed = envelope.seal_roster(
            self.secrets.key, device=self.device, room=self.room, id=uuid7(),
            ts=timezone.now(), seats=seats,
        )  # fmt: skip
        try:
            await client.push(self.bridge.http, self.relay, self.room, self.secrets.token, [sealed])
        except client.RelayError as exc:
            if exc.status not in (429, 507):
                raise
            await self._note_error("push", exc)
            return
        await on_database_thread(state.mark_roster, self.bridged_id, digest)
        self.unproven = False

    # -- pull -----------------------------------------------------------------------

    async def _pull_loop(self) -> None:
        backoff, cursor, limit = 0.0, 0, client.PULL_ENTRIES
        while True:
            await self.leased.wait()
            if self.regained:
                self.regained = False
                cursor = await on_database_thread(state.cursor_of, self.bridged_id)
            try:
                answer = await client.pull(
                    self.bridge.http,
                    self.relay,
                    self.room,
                    self.secrets.token,
                    cursor,
                    self.bridge.wait_seconds,
                    limit,
                )
                backoff, limit = 0.0, client.PULL_ENTRIES
            except client.AnswerTooLarge as exc:
                limit = max(1, limit // 2)  # entries bigger than ours: ask for fewer at a time
                backoff = await self._failed("pull", exc, backoff)
                continue
            except client.RelayError as exc:
                backoff = await self._failed("pull", exc, backoff)
                continue
            except Exception as exc:
                log.exception("pulling room %s failed", self.room)
                backoff = await self._failed("pull", exc, backoff)
                continue
            cursor = await self._land(answer, cursor)

    # -- once (salon relay sync) ----------------------------------------------------

    async def sync(self) -> dict:
        """Push everything waiting (as far as the rate window lets), the roster with it,
        then pull everything there; the room's standing before and after."""
        result = {"room": self.room, "pushed": 0, "landed": 0, "error": None, "held": None}
        held = await on_database_thread(state.claim_lease, self.bridged_id, self.bridge.holder)
        if not held:
            result["held"] = "another bridge of this store carries it (a running daemon)"
            return result
        before = await on_database_thread(state.standing, self.bridged_id)
        self.unproven = True  # the roster goes too: every sync proves a push
        try:
            pause = 0.0
            while pause == 0.0:
                pause = await self.push_once()
            cursor = await on_database_thread(state.cursor_of, self.bridged_id)
            while True:
                answer = await client.pull(
                    self.bridge.http, self.relay, self.room, self.secrets.token, cursor, 0
                )
                reached = await self._land(answer, cursor)
                if reached <= cursor:
                    break
                cursor = reached
        except client.RelayError as exc:
            await self._note_error("sync", exc)
            result["error"] = exc.message
        finally:
            with contextlib.suppress(Exception):
                await on_database_thread(state.release_lease, self.bridged_id, self.bridge.holder)
        after = await on_database_thread(state.standing, self.bridged_id)
        result["pushed"] = after["pushed"] - before["pushed"]
        result["landed"] = after["landed"] - before["landed"]
        result["bridge"] = after
        return result

    async def _land(self, answer: dict, cursor: int) -> int:
        next_cursor = int(answer.get("cursor", cursor))
        await on_database_thread(
            functools.partial(
                state.land,
                self.bridged_id,
                self.secrets.key,
                answer.get("entries") or [],
                cursor=next_cursor,
                gap=int(answer.get("gap") or 0),
            )
        )
        return max(next_cursor, cursor)

    async def _note_error(self, what: str, exc: Exception) -> None:
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        self.unproven = True
        with contextlib.suppress(Exception):
            await on_database_thread(state.mark_error, self.bridged_id, f"{what}: {message}")

    async def _failed(self, what: str, exc: Exception, backoff: float) -> float:
        await self._note_error(what, exc)
        pause = (getattr(exc, "extra", None) or {}).get("retryAfter")
        # The relay's word, within reason: a rate window is a minute.
        pause = min(float(pause), MAX_RETRY_AFTER) if type(pause) in (int, float) else 0.0
        backoff = min(MAX_BACKOFF_SECONDS, backoff * 2 if backoff else 0.2)
        await self.bridge.sleep(max(backoff, pause))
        return backoff


class Bridge:
    """Every bridged room of this store, kept in step with the keys file."""

    def __init__(self, *, keys_path: Path | None = None, wait_seconds: int | None = None):
        self.keys_path = keys_path
        self.wait_seconds = wait_seconds or client.LONG_POLL_SECONDS
        self.holder = state.holder_name()
        self.links: dict[str, RoomLink] = {}
        self.http = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._stamp: object = "unread"
        self.sleep = asyncio.sleep  # the pauses of the links (a test's clock has its own)

    async def start(self) -> Bridge:
        self.loop = asyncio.get_running_loop()
        self.http = client.async_client()
        signals.entry_stored.connect(self._stored, dispatch_uid=f"relay.bridge.{id(self)}")
        self._task = asyncio.ensure_future(self._supervise())
        return self

    async def stop(self) -> None:
        signals.entry_stored.disconnect(dispatch_uid=f"relay.bridge.{id(self)}")
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        for link in list(self.links.values()):
            await link.stop()
        self.links.clear()
        if self.http is not None:
            await self.http.aclose()

    def _stored(self, sender, room: str, seq: int, via: str, **kwargs) -> None:
        """An entry committed in this process (on the database thread): push it now."""
        link = self.links.get(room)
        if link is None or via == "relay" or self.loop is None or self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(link.kick.set)

    async def _supervise(self) -> None:
        while True:
            try:
                await self.reload()
            except Exception:
                log.exception("the bridge could not read its rooms; trying again")
            await asyncio.sleep(RELOAD_SECONDS)

    async def reload(self) -> None:
        """Start a link for each room the keys file bridges, stop those it no longer does."""
        stamp = keys.stamp(self.keys_path)
        if stamp == self._stamp:
            return
        try:
            found = keys.load(self.keys_path)
        except keys.KeysError as exc:
            log.error("the bridge is idle: %s", exc)
            self._stamp = stamp
            return
        wanted: dict[str, tuple[int, keys.RoomKeys]] = {}
        for room, secrets in found.rooms.items():
            bridged = await on_database_thread(
                functools.partial(
                    state.ensure_bridged, room, relay=found.relay, device=found.device
                )
            )
            if bridged is not None:
                wanted[room] = (bridged.pk, secrets)
        for room in list(self.links):
            link = self.links[room]
            if room not in wanted or wanted[room][1] != link.secrets or link.relay != found.relay:
                await link.stop()
                del self.links[room]
        for room, (bridged_id, secrets) in wanted.items():
            if room not in self.links:
                link = RoomLink(self, room, bridged_id, found.relay, found.device, secrets)
                self.links[room] = link
                link.start()
                log.info("bridging room %s through %s as %s", room, found.relay, found.device)
        if len(wanted) == len(found.rooms):  # else look again: a room may be created yet
            self._stamp = stamp


def _whole(value) -> bool:
    return type(value) is int and value >= 0


async def sync_once(*, keys_path: Path | None = None, http=None) -> dict:
    """`salon relay sync`: every bridged room pushed and pulled once (KeysError when the
    keys file cannot be read). `http`: the client to speak to the relay with (its own)."""
    found = keys.load(keys_path)
    bridge = Bridge(keys_path=keys_path)
    bridge.http = http or client.async_client()
    rooms = []
    try:
        for room, secrets in sorted(found.rooms.items()):
            bridged = await on_database_thread(
                functools.partial(
                    state.ensure_bridged, room, relay=found.relay, device=found.device
                )
            )
            if bridged is None:
                rooms.append({"room": room, "held": None, "error": f"no room {room!r} here"})
                continue
            link = RoomLink(bridge, room, bridged.pk, found.relay, found.device, secrets)
            rooms.append(await link.sync())
    finally:
        await bridge.http.aclose()
    return {"relay": found.relay or None, "device": found.device or None, "rooms": rooms}


async def companion(host) -> Bridge:
    """What the daemon starts beside its streams (salond.companions.add_companion)."""
    return await Bridge().start()


async def run_alone() -> None:
    """`salon relay bridge`: the bridge with no daemon, until SIGINT or SIGTERM. What lands
    rings the store's other servers (a `salon mcp` of a session) over their local line."""
    from django.conf import settings

    from salond import host, line

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if not settings.DATABASE_URL:
        store = host.own_store()
        bell.add_ringer(lambda entry_id, seats: line.ring(store, entry_id, seats))
    bridge = await Bridge().start()
    try:
        await stop.wait()
    finally:
        await bridge.stop()
