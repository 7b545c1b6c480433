"""The bridge's side in this machine's store: the BridgedRoom rows, and the database
steps of carrying a room (what is left to push, landing what arrived, the lease).

Synchronous and short: the bridge (relay.bridge) runs each on the database thread and
does its network I/O outside them. Entries land through bus.services (land_entry), the
only writer of bus rows.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from bus import rules, services, signing
from bus.models import Entry, Membership, Room
from relay import envelope
from relay.models import BridgedRoom

log = logging.getLogger("salon.relay")

PUSH_BATCH = 100
PUSH_BATCH_BYTES = 2 << 20  # plaintext bytes per push; sealed and encoded it stays < 4 MiB
LEASE_SECONDS = 15
# Entries landed per transaction: one commit each, while hooks and sends wait for the
# write lock no longer than a few tens of milliseconds.
LAND_CHUNK = 50
# A roster is sent when its seats or their liveness change, and again this often while a
# member stays live; the other machines hold a remote seat live a little longer.
ROSTER_REFRESH = timedelta(minutes=5)
ROSTER_LIVE_HOLD = timedelta(minutes=6)


def bridge_room(room: Room, *, relay: str, device: str) -> BridgedRoom:
    """Mark a room as bridged (the handshake). The bridge carries what is written from
    now on: the room's earlier entries stay on this machine."""
    bridged, created = BridgedRoom.objects.get_or_create(
        room=room, defaults={"relay": relay, "device": device, "pushed_seq": room.last_seq}
    )
    if not created and (bridged.relay, bridged.device) != (relay, device):
        BridgedRoom.objects.filter(pk=bridged.pk).update(
            relay=relay, device=device, cursor=0, last_error="", last_error_at=None
        )
        bridged.refresh_from_db()
    return bridged


def bridged_rooms() -> list[BridgedRoom]:
    return list(BridgedRoom.objects.select_related("room").order_by("room__name"))


def ensure_bridged(room_name: str, *, relay: str, device: str) -> BridgedRoom | None:
    """The row of a room the keys file names (None when the room is not in this store)."""
    room = Room.objects.filter(name=room_name).first()
    if room is None:
        return None
    return bridge_room(room, relay=relay, device=device)


# ---------------------------------------------------------------- the lease


def holder_name() -> str:
    return f"{socket.gethostname()[:40]}:{os.getpid()}"


def _dead_here(holder: str) -> bool:
    """A holder on this host whose process is gone (a killed daemon holds no lease)."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname()[:40] or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def claim_lease(bridged_id: int, holder: str) -> bool:
    """Hold (or keep holding) the room for LEASE_SECONDS: one conditional UPDATE, so two
    bridges of the store never both carry it."""
    now = timezone.now()
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now) | Q(lease_holder=holder)
    current = BridgedRoom.objects.filter(pk=bridged_id).values_list("lease_holder", flat=True)
    previous = current.first()
    if previous and previous != holder and _dead_here(previous):
        free |= Q(lease_holder=previous)
    until = now + timedelta(seconds=LEASE_SECONDS)
    return bool(
        BridgedRoom.objects.filter(pk=bridged_id)
        .filter(free)
        .update(lease_holder=holder, lease_until=until)
    )


def release_lease(bridged_id: int, holder: str) -> None:
    BridgedRoom.objects.filter(pk=bridged_id, lease_holder=holder).update(lease_until=None)


# ---------------------------------------------------------------- pushing


def pending(bridged_id: int, limit: int = PUSH_BATCH) -> tuple[list[dict], int, int]:
    """The next entries written here to push, oldest first, as sealing needs them; the
    room's `pushed_seq` now, and the seq this look reached (entries that landed from the
    relay are passed over: the relay already has them; so is an entry whose signature
    fails — it is not carried). At most `limit` entries: what fits the relay's rate."""
    bridged = BridgedRoom.objects.select_related("room").get(pk=bridged_id)
    rows = list(
        Entry.objects.filter(room_id=bridged.room_id, seq__gt=bridged.pushed_seq)
        .select_related("room")
        .order_by("seq")[: max(1, min(limit, PUSH_BATCH))]
    )
    batch, size, reached = [], 0, bridged.pushed_seq
    for row in rows:
        if batch and size + len(row.content) > PUSH_BATCH_BYTES:
            break
        reached = row.seq
        if row.via == "relay" or "@" in rules.agent_of_seat(row.sender):
            continue
        if not signing.verify_entry(row):
            log.warning("entry %s fails its signature here: not carried to the relay", row.id)
            BridgedRoom.objects.filter(pk=bridged_id).update(rejected=F("rejected") + 1)
            continue
        size += len(row.content)
        batch.append(
            {
                "id": row.id,
                "room": row.room.name,
                "ts": row.ts,
                "sender": row.sender,
                "type": row.type,
                "to": list(row.to),
                "re": row.re,
                "content": row.content,
                "meta": row.meta,
            }
        )
    return batch, bridged.pushed_seq, reached


def mark_pushed(bridged_id: int, reached: int, pushed: int, rejected: int = 0) -> None:
    now = timezone.now()
    BridgedRoom.objects.filter(pk=bridged_id, pushed_seq__lt=reached).update(
        pushed_seq=reached,
        pushed=F("pushed") + pushed,
        rejected=F("rejected") + rejected,
        last_sync_at=now,
    )
    _succeeded(bridged_id, push_ok_at=now)


def mark_error(bridged_id: int, message: str) -> None:
    BridgedRoom.objects.filter(pk=bridged_id).update(
        last_error=message[:500], last_error_at=timezone.now()
    )


def _succeeded(bridged_id: int, **when) -> None:
    """A push (push_ok_at) or a pull (pull_ok_at) the relay answered. The last error is
    cleared only once a push and a pull have both succeeded after it: a pull that works
    says nothing of a push the relay keeps refusing, nor the other way round."""
    BridgedRoom.objects.filter(pk=bridged_id).update(**when)
    BridgedRoom.objects.filter(
        pk=bridged_id,
        last_error_at__isnull=False,
        push_ok_at__gt=F("last_error_at"),
        pull_ok_at__gt=F("last_error_at"),
    ).update(last_error="", last_error_at=None)


def mark_pulled(bridged_id: int) -> None:
    """A pull the relay answered (with nothing, or with what then landed)."""
    _succeeded(bridged_id, pull_ok_at=timezone.now())


# ---------------------------------------------------------------- rosters


def roster_due(bridged_id: int, force: bool = False) -> tuple[list[tuple[str, str]], str] | None:
    """This machine's seats in the room with their liveness, and its digest, when the
    roster should be sent (it changed, or it is due again while a member is live, or
    `force`: after an error, a push that proves the relay takes pushes again)."""
    bridged = BridgedRoom.objects.get(pk=bridged_id)
    at = timezone.now()
    members = (
        Membership.objects.current()
        .filter(room_id=bridged.room_id, seat__remote=False)
        .select_related("seat__agent")
        .order_by("seat__name")
    )
    seats = [
        (m.seat.name, m.seat.liveness(at), _focus(m.seat))
        for m in members
        if "@" not in rules.agent_of_seat(m.seat.name)
    ]
    digest = hashlib.sha256(repr(seats).encode()).hexdigest()
    stale = bridged.roster_at is None or at - bridged.roster_at >= ROSTER_REFRESH
    live = any(seat[1] == rules.LIVE for seat in seats)
    if force or digest != bridged.roster_digest or (stale and live):
        return seats, digest
    return None


def _focus(seat) -> dict | None:
    """A seat's focus as its roster line carries it (the other machines' letterbox and
    `salon agents` read it there)."""
    if not seat.focus_text:
        return None
    return {
        "text": seat.focus_text,
        "files": list(seat.focus_files or []),
        "phase": seat.focus_phase or "",
        "ts": envelope.iso_ms(seat.focus_ts) if seat.focus_ts else None,
    }


def mark_roster(bridged_id: int, digest: str) -> None:
    now = timezone.now()
    BridgedRoom.objects.filter(pk=bridged_id).update(
        roster_digest=digest, roster_at=now, last_sync_at=now
    )
    _succeeded(bridged_id, push_ok_at=now)


# ---------------------------------------------------------------- landing


def standing(bridged_id: int) -> dict:
    """Where the room's bridge stands (its row's status)."""
    return BridgedRoom.objects.select_related("room").get(pk=bridged_id).status()


def cursor_of(bridged_id: int) -> int:
    return BridgedRoom.objects.values_list("cursor", flat=True).get(pk=bridged_id)


def land(bridged_id: int, key: bytes, envelopes: list[dict], *, cursor: int, gap: int = 0) -> dict:
    """Open and land what a pull brought, and move the cursor with it.

    An envelope that does not open (changed on the way, another key) or that the bus
    refuses is counted, never stored; one already here (by entry id) is dropped. Entries
    land LAND_CHUNK to a transaction, with the cursor moved past them in the same one: one
    commit per chunk instead of per entry, and after a crash the cursor is exactly where
    the landed entries end (a duplicate is still dropped by id)."""
    bridged = BridgedRoom.objects.select_related("room").get(pk=bridged_id)
    totals = {"landed": 0, "duplicates": 0, "refused": 0}
    chunks = [envelopes[i : i + LAND_CHUNK] for i in range(0, len(envelopes), LAND_CHUNK)]
    for index, chunk in enumerate(chunks or [[]]):
        last = index == len(chunks or [[]]) - 1
        reached = cursor if last else int(chunk[-1].get("seq") or bridged.cursor)
        with transaction.atomic():
            counts, refusal = _land_chunk(bridged, key, chunk)
            changes = {
                "cursor": Greatest(F("cursor"), reached),
                "landed": F("landed") + counts["landed"],
                "duplicates": F("duplicates") + counts["duplicates"],
                "refused": F("refused") + counts["refused"],
                "missed": F("missed") + (gap if index == 0 else 0),
                "last_sync_at": timezone.now(),
            }
            if refusal:
                changes["last_refusal"] = refusal[:500]
            BridgedRoom.objects.filter(pk=bridged_id).update(**changes)
        for name, count in counts.items():
            totals[name] += count
    mark_pulled(bridged_id)
    return totals


def _land_chunk(bridged: BridgedRoom, key: bytes, chunk: list[dict]) -> tuple[dict, str]:
    counts = {"landed": 0, "duplicates": 0, "refused": 0}
    refusal = ""
    for item in chunk:
        try:
            opened = envelope.open_envelope(
                key, item, room=bridged.room.name, device=bridged.device
            )
            if isinstance(opened, envelope.Roster):
                with transaction.atomic():  # a refused roster leaves nothing half-done
                    services.seats.remote_roster(
                        room=bridged.room,
                        device=opened.device,
                        seats=opened.seats,
                        live_for=ROSTER_LIVE_HOLD,
                        focus=opened.focus,
                    )
                continue
            landed = services.entries.land_entry(
                id=opened.id,
                room=opened.room,
                ts=opened.ts,
                sender=opened.sender,
                type=opened.type,
                to=opened.to,
                re=opened.re,
                content=opened.content,
                meta=opened.meta,
            )
        except (envelope.EnvelopeError, rules.RuleError) as exc:
            counts["refused"] += 1
            refusal = f"entry {str(item.get('id'))[:40]}: {exc}"
            log.warning("refused an entry from the relay in room %s: %s", bridged.room, refusal)
            continue
        counts["landed" if landed else "duplicates"] += 1
    return counts, refusal
