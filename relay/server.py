"""Relay mode: what a relay does with invites, device tokens and sealed entries (docs/RELAY.md).

These are the relay's operations, synchronous and on the database; relay.api is their
HTTP face. A relay never holds a room key: it stores and hands out ciphertext with the
routing fields it needs (room, entry id, device, sender seat, time), nothing else.

Refusals come first and store nothing (`Refusal` carries the HTTP status): an unknown,
expired or revoked token (401), a token used for another room (403, naming the room it
is for), a device writing as another device (403), a reused or expired invite (403), a
push over the size limit (413), a device over its rate (429), a room over its ceiling
of entries or bytes (507). Retention drops envelopes older than
AGENT_SALON_RELAY_RETENTION_HOURS.
"""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, Min
from django.utils import timezone

from bus import rules
from relay import crypto
from relay.envelope import check_device_name, device_of
from relay.models import RelayDevice, RelayEnvelope, RelayInvite, RelayRoom

MAX_PUSH_ENTRIES = 100
MAX_PULL_ENTRIES = 500
ENVELOPE_FIELDS = ("id", "sender", "ts", "nonce", "ciphertext")
PURGE_EVERY_SECONDS = 60
PURGE_BATCH = 2000
RATE_WINDOW = timedelta(minutes=1)

# The relay's clock: what rate windows, token expiry and retention are measured by (a
# test of hours of traffic gives it a clock of its own).
clock = timezone.now


def _now() -> datetime:
    return clock()


class Refusal(Exception):
    """A refused relay request: HTTP status, a message saying how to fix it, extras."""

    def __init__(self, status: int, message: str, **extra) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def enabled() -> bool:
    return bool(settings.RELAY_SECRET)


def limits() -> dict:
    return {
        "maxEntryBytes": settings.RELAY_MAX_ENTRY_BYTES,
        "ratePerMinute": settings.RELAY_RATE,
        "roomEntries": settings.RELAY_ROOM_ENTRIES,
        "roomBytes": settings.RELAY_ROOM_BYTES,
        "retentionHours": settings.RELAY_RETENTION_HOURS,
        "deviceTtlDays": settings.RELAY_DEVICE_TTL_DAYS,
    }


def _iso(ts: datetime | None) -> str | None:
    from bus.signing import iso_ms

    return iso_ms(ts) if ts else None


# ---------------------------------------------------------------- invites, tokens


def redeem(invite: str) -> dict:
    """Turn a single-use invite into a device token for its room (valid
    AGENT_SALON_RELAY_DEVICE_TTL_DAYS days).

    A device that joins a room again (a new invite) gets a new token; its old one stops
    working the moment the new invite is redeemed. The invite's id is recorded in the same
    transaction: a second redemption, even at the same moment, is refused. An invite made
    before its device was revoked is refused."""
    now = _now()
    try:
        claim = crypto.check_claim(settings.RELAY_SECRET, invite, kind="join", now=time.time())
        rules.validate_name(claim.room, "room")
        check_device_name(claim.device)
    except (crypto.CryptoError, rules.RuleError) as exc:
        raise Refusal(403, f"invite refused: {exc}") from None
    revoked = (
        RelayDevice.objects.filter(name=claim.device, revoked_at__isnull=False)
        .aggregate(at=Max("revoked_at"))
        .get("at")
    )
    if revoked is not None and claim.issued <= revoked.timestamp() * 1000:
        raise Refusal(
            403,
            f"invite refused: device {claim.device!r} was revoked at {_iso(revoked)}, after "
            "this invite was made; ask for a new one (salon invite ROOM --for DEVICE)",
        )
    days = timedelta(days=settings.RELAY_DEVICE_TTL_DAYS)
    token = crypto.new_device_token()
    try:
        with transaction.atomic():
            RelayInvite.objects.create(
                invite_id=claim.id[:64],
                room=claim.room,
                device=claim.device,
                expires_at=datetime.fromtimestamp(claim.expires, UTC),
                used_at=now,
            )
            room, _ = RelayRoom.objects.get_or_create(name=claim.room)
            RelayDevice.objects.update_or_create(
                room=room,
                name=claim.device,
                defaults={
                    "token_hash": crypto.token_hash(settings.RELAY_SECRET, token),
                    "joined_at": now,
                    "expires_at": now + days,
                    "revoked_at": None,
                },
            )
    except IntegrityError:
        raise Refusal(
            403,
            "invite refused: it has been used already (an invite is single-use); "
            "ask for a new one (salon invite ROOM --for DEVICE)",
        ) from None
    return {
        "token": token,
        "room": claim.room,
        "device": claim.device,
        "expires": _iso(now + days),
    }


def authenticate(token: str | None, room: str) -> RelayDevice:
    """The device a bearer token stands for, allowed in `room`; a Refusal otherwise."""
    if not token:
        raise Refusal(
            401, "a device token is required: Authorization: Bearer <token> (salon join …)"
        )
    device = (
        RelayDevice.objects.select_related("room")
        .filter(token_hash=crypto.token_hash(settings.RELAY_SECRET, token))
        .first()
    )
    if device is None:
        raise Refusal(
            401,
            "unknown device token: this relay never issued it, or its secret has changed "
            "since (which revokes every device); join again with a new invite",
        )
    if device.revoked_at is not None:
        raise Refusal(
            401,
            f"device {device.name!r} was revoked at {_iso(device.revoked_at)} (salon relay "
            "revoke); ask the relay's operator for a new invite",
        )
    if device.expires_at <= _now():
        raise Refusal(401, f"this device token expired at {_iso(device.expires_at)}; join again")
    if device.room.name != room:
        raise Refusal(
            403,
            f"this token is for room {device.room.name!r}, not {room[:64]!r}: each room "
            "has its own token (join that room with its own invite)",
            room=device.room.name,
        )
    return device


def check_pass(text: str, kind: str = "status") -> crypto.Claim:
    """An operator's pass (status, revoke), signed with the relay secret; a Refusal
    otherwise."""
    try:
        return crypto.check_claim(settings.RELAY_SECRET, text, kind=kind, now=time.time())
    except crypto.CryptoError as exc:
        raise Refusal(403, f"{kind} pass refused: {exc}") from None


def revoke(device: str, issued_ms: int = 0) -> dict:
    """End every token of `device` (in every room), and every invite for it made before
    the revoke pass (`issued_ms`: the operator's clock, which also dates the invites).
    Its envelopes stay (the other devices may not have read them yet)."""
    try:
        check_device_name(device)
    except rules.RuleError as exc:
        raise Refusal(422, str(exc), field="device") from None
    now = datetime.fromtimestamp(issued_ms / 1000, UTC) if issued_ms > 0 else _now()
    rooms = sorted(RelayDevice.objects.filter(name=device).values_list("room__name", flat=True))
    if not rooms:
        raise Refusal(
            404,
            f"no device {device!r} on this relay (`salon relay status` lists the devices)",
        )
    RelayDevice.objects.filter(name=device).update(revoked_at=now)
    return {"device": device, "revoked": _iso(now), "rooms": rooms}


# ---------------------------------------------------------------- push


@dataclass(frozen=True)
class Sealed:
    id: uuid.UUID
    sender: str
    ts: str
    nonce: str
    ciphertext: bytes


def _b64_bytes(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise Refusal(422, "an envelope's ciphertext is not base64url text") from None


def check_envelopes(device: RelayDevice, items: object) -> list[Sealed]:
    """The pushed envelopes, checked for shape, identity and size (nothing stored)."""
    if not isinstance(items, list) or not items:
        raise Refusal(422, 'push {"entries": [envelope, …]}: a non-empty list', field="entries")
    if len(items) > MAX_PUSH_ENTRIES:
        raise Refusal(413, f"{len(items)} envelopes in one push; send at most {MAX_PUSH_ENTRIES}")
    sealed = []
    for item in items:
        if not isinstance(item, dict) or set(item) != set(ENVELOPE_FIELDS):
            raise Refusal(422, f"an envelope has exactly the fields {', '.join(ENVELOPE_FIELDS)}")
        if not all(isinstance(item[f], str) for f in ENVELOPE_FIELDS):
            raise Refusal(422, "every envelope field is text")
        try:
            entry_id = uuid.UUID(item["id"])
            rules.validate_name(item["sender"], "sender")
        except (ValueError, rules.RuleError) as exc:
            raise Refusal(422, f"an envelope's id or sender is malformed: {exc}") from None
        if len(item["ts"]) > 32 or len(item["nonce"]) > 32:
            raise Refusal(422, "an envelope's ts or nonce is malformed")
        if device_of(item["sender"]) != device.name:
            raise Refusal(
                403,
                f"device {device.name!r} may write only as its own seats "
                f"(agent@{device.name}#…), not as {item['sender'][:80]!r}",
            )
        ciphertext = _b64_bytes(item["ciphertext"])
        if len(ciphertext) > settings.RELAY_MAX_ENTRY_BYTES:
            raise Refusal(
                413,
                f"entry {entry_id} is {len(ciphertext)} bytes sealed, over this relay's "
                f"limit of {settings.RELAY_MAX_ENTRY_BYTES} (AGENT_SALON_RELAY_MAX_ENTRY_BYTES)",
                id=str(entry_id),
            )
        sealed.append(Sealed(entry_id, item["sender"], item["ts"], item["nonce"], ciphertext))
    return sealed


def push(device: RelayDevice, items: object) -> dict:
    """Store a device's envelopes in its room, in order; an envelope whose entry id the
    room already holds is skipped (a push repeated after a lost answer)."""
    sealed = check_envelopes(device, items)
    now = _now()
    purge(now)
    with transaction.atomic():
        room = RelayRoom.objects.select_for_update().get(pk=device.room_id)
        me = RelayDevice.objects.select_for_update().get(pk=device.pk)
        held = set(
            RelayEnvelope.objects.filter(
                room=room, entry_id__in=[s.id for s in sealed]
            ).values_list("entry_id", flat=True)
        )
        fresh, seen = [], set(held)
        for item in sealed:
            if item.id not in seen:
                seen.add(item.id)
                fresh.append(item)
        _take_rate(me, len(fresh), now)
        size = sum(len(item.ciphertext) for item in fresh)
        # What still fits: a bridge sends that much, or waits for retention to free space.
        left = {
            "entriesLeft": max(0, settings.RELAY_ROOM_ENTRIES - room.entries),
            "bytesLeft": max(0, settings.RELAY_ROOM_BYTES - room.bytes),
        }
        if room.entries + len(fresh) > settings.RELAY_ROOM_ENTRIES:
            raise Refusal(
                507,
                f"room {room.name!r} holds {room.entries} entries, and its ceiling is "
                f"{settings.RELAY_ROOM_ENTRIES} (AGENT_SALON_RELAY_ROOM_ENTRIES): space "
                f"frees as entries older than {settings.RELAY_RETENTION_HOURS} h are dropped",
                **left,
            )
        if room.bytes + size > settings.RELAY_ROOM_BYTES:
            raise Refusal(
                507,
                f"room {room.name!r} holds {room.bytes} bytes, and its ceiling is "
                f"{settings.RELAY_ROOM_BYTES} (AGENT_SALON_RELAY_ROOM_BYTES): space "
                f"frees as entries older than {settings.RELAY_RETENTION_HOURS} h are dropped",
                **left,
            )
        seq = room.last_seq
        rows = []
        for item in fresh:
            seq += 1
            rows.append(
                RelayEnvelope(
                    room=room,
                    seq=seq,
                    entry_id=item.id,
                    device=device.name,
                    sender=item.sender,
                    ts=item.ts,
                    nonce=item.nonce,
                    ciphertext=item.ciphertext,
                    size=len(item.ciphertext),
                    stored_at=now,
                )
            )
        RelayEnvelope.objects.bulk_create(rows)
        RelayRoom.objects.filter(pk=room.pk).update(
            last_seq=seq, entries=room.entries + len(rows), bytes=room.bytes + size
        )
        RelayDevice.objects.filter(pk=me.pk).update(
            last_seen=now,
            pushed=me.pushed + len(rows),
            window_start=me.window_start,
            window_count=me.window_count,
        )
    return {
        "stored": len(rows),
        "duplicates": len(sealed) - len(rows),
        "lastSeq": seq,
        **_window_left(me, now),
    }


def _window_left(device: RelayDevice, now: datetime) -> dict:
    """What is left of the device's rate window: `rateLeft` entries may be pushed before
    `rateResetIn` seconds have passed (a bridge sends batches that fit)."""
    reset = 0
    if device.window_start is not None:
        reset = max(0, int((device.window_start + RATE_WINDOW - now).total_seconds()) + 1)
    return {
        "rate": settings.RELAY_RATE,
        "rateLeft": max(0, settings.RELAY_RATE - device.window_count)
        if reset
        else settings.RELAY_RATE,
        "rateResetIn": reset,
    }


def _take_rate(device: RelayDevice, count: int, now: datetime) -> None:
    """Count `count` entries against the device's one-minute window (in memory; push
    writes it back), or refuse the whole push, saying how many would fit now and when
    the window starts again."""
    if device.window_start is None or now - device.window_start >= RATE_WINDOW:
        device.window_start, device.window_count = now, 0
    if device.window_count + count > settings.RELAY_RATE:
        left = _window_left(device, now)
        retry = max(1, left["rateResetIn"])
        fits = f"{left['rateLeft']} fit now; " if left["rateLeft"] else ""
        raise Refusal(
            429,
            f"device {device.name!r} is over its rate of {settings.RELAY_RATE} entries a "
            f"minute (AGENT_SALON_RELAY_RATE): {count} pushed at once, {fits}try again "
            f"in {retry} s",
            retryAfter=retry,
            **{k: v for k, v in left.items() if k != "rateResetIn"},
        )
    device.window_count += count


# ---------------------------------------------------------------- pull


def pull(device: RelayDevice, after: int, limit: int = MAX_PULL_ENTRIES) -> dict:
    """The room's envelopes after seq `after`, oldest first, but the device's own;
    `cursor` is how far this answer read (own envelopes included), `gap` how many seqs
    retention dropped before the device read them. (`reading` noted the device's cursor
    when it asked.)"""
    now = _now()
    purge(now)
    limit = max(1, min(limit, MAX_PULL_ENTRIES))
    rows = list(
        RelayEnvelope.objects.filter(room_id=device.room_id, seq__gt=after).order_by("seq")[:limit]
    )
    purged = RelayRoom.objects.filter(pk=device.room_id).values_list("purged_seq", flat=True)[0]
    return {
        "entries": [
            {
                "seq": row.seq,
                "id": str(row.entry_id),
                "device": row.device,
                "sender": row.sender,
                "ts": row.ts,
                "nonce": row.nonce,
                "ciphertext": crypto.b64(bytes(row.ciphertext)),
            }
            for row in rows
            if row.device != device.name
        ],
        "cursor": rows[-1].seq if rows else after,
        "gap": max(0, purged - after),
    }


def reading(device: RelayDevice, after: int) -> None:
    """A device asks from `after`: it holds everything up to there (its cursor)."""
    RelayDevice.objects.filter(pk=device.pk).update(last_seen=_now(), cursor=after)


def has_after(device: RelayDevice, after: int) -> bool:
    return RelayEnvelope.objects.filter(room_id=device.room_id, seq__gt=after).exists()


# ---------------------------------------------------------------- views of the relay


def room_view(room: RelayRoom) -> dict:
    span = RelayEnvelope.objects.filter(room=room).aggregate(
        oldest=Min("stored_at"), newest=Max("stored_at")
    )
    return {
        "room": room.name,
        "entries": room.entries,
        "bytes": room.bytes,
        "lastSeq": room.last_seq,
        "oldest": _iso(span["oldest"]),
        "newest": _iso(span["newest"]),
        "devices": [
            {
                "device": d.name,
                "joined": _iso(d.joined_at),
                "expires": _iso(d.expires_at),
                "lastSeen": _iso(d.last_seen),
                "cursor": d.cursor,
                "behind": max(0, room.last_seq - d.cursor),
                "pushed": d.pushed,
                "revoked": _iso(d.revoked_at),
            }
            for d in room.devices.order_by("name")
        ],
    }


def relay_view(rooms: list[RelayRoom] | None = None) -> dict:
    rooms = rooms if rooms is not None else list(RelayRoom.objects.order_by("name"))
    return {"relay": "agent-salon", "limits": limits(), "rooms": [room_view(r) for r in rooms]}


# ---------------------------------------------------------------- retention

_last_purge = [0.0]


def purge(now: datetime | None = None, *, force: bool = False) -> int:
    """Drop envelopes older than the retention (at most once a minute per process, in
    batches); returns how many went."""
    now = now or _now()
    clock = now.timestamp()  # the relay's clock
    if not force and 0 <= clock - _last_purge[0] < PURGE_EVERY_SECONDS:
        return 0
    _last_purge[0] = clock
    cutoff = now - timedelta(hours=settings.RELAY_RETENTION_HOURS)
    dropped = 0
    while True:
        with transaction.atomic():
            batch = list(
                RelayEnvelope.objects.filter(stored_at__lt=cutoff)
                .order_by("stored_at")
                .values_list("pk", "room_id", "seq", "size")[:PURGE_BATCH]
            )
            if not batch:
                break
            per_room: dict[int, list[tuple[int, int]]] = {}
            for _, room_id, seq, size in batch:
                per_room.setdefault(room_id, []).append((seq, size))
            for room_id in sorted(per_room):  # a fixed lock order
                room = RelayRoom.objects.select_for_update().get(pk=room_id)
                gone = per_room[room_id]
                RelayRoom.objects.filter(pk=room_id).update(
                    entries=max(0, room.entries - len(gone)),
                    bytes=max(0, room.bytes - sum(size for _, size in gone)),
                    purged_seq=max(room.purged_seq, *(seq for seq, _ in gone)),
                )
            RelayEnvelope.objects.filter(pk__in=[pk for pk, *_ in batch]).delete()
        dropped += len(batch)
    return dropped
