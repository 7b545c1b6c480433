"""An entry on its way between machines: names as they cross, and the sealed envelope.

Pure (no Django, no database): the bridge (relay.bridge) turns stored entries into
envelopes and envelopes into the fields bus.services.entries.land_entry stores.

Names (docs/RELAY.md, "Names across machines"). A seat is named on its own machine
(`web-app#3f9c1a20`); across the relay it is qualified with the device it lives on
(`web-app@laptop#3f9c1a20`), and that is how it reads on every other machine. An agent
name alone (`web-app`) means every seat of it on every machine, so it crosses unchanged.
A name qualified with a device (`web-app@macmini`) is written as the writer saw it; when
it lands on macmini, the `@macmini` goes (it names macmini's own `web-app`), and on a
third machine it passes through untouched.

Rosters. Besides entries, a bridge sends its room's roster when it changes (and again
while a member stays live): the seats of this machine in the room and the liveness of
each, sealed like an entry, sent by the device itself (`@laptop`). The other machines
make those seats members of the room, so `--to web-app@laptop` is a name they know
before web-app has written anything.

Ids. An entry keeps its id everywhere: ids are UUIDv7 (time and 74 random bits), so the
id one machine gave is unique on every other, and `re` needs no translation — it names
the same entry on each machine that has it. Duplicates (a resync after a restart) are
recognised by that id.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from bus import rules
from bus.signing import iso_ms
from relay import crypto

# The fields of an entry that travel sealed; the others (id, room, sender, ts) are the
# envelope's routing fields, bound to the ciphertext as associated data.
BODY_FIELDS = ("type", "to", "re", "content", "meta")


class EnvelopeError(ValueError):
    """An envelope this machine refuses to land; the message says why."""


def check_device_name(name: str) -> str:
    """A device name: a valid name (bus.rules) without `@` or `#`, which delimit it in seats."""
    rules.validate_name(name, "device")
    if "@" in name or "#" in name:
        raise rules.RuleError(
            f"device name {name[:64]!r} holds @ or #, which mark a device in a seat name: "
            "use letters, digits and . _ - (e.g. the host name)"
        )
    return name


def device_of(seat: str) -> str:
    """`web-app@laptop#3f9c` → `laptop`; "" for a local name."""
    return rules.agent_of_seat(seat).partition("@")[2]


def wire_name(name: str, device: str) -> str:
    """A local seat name as other machines read it: qualified with this device. An agent
    name alone (every seat, every machine) and a name already qualified stay as they are."""
    agent, hash_sign, session = name.partition("#")
    if "@" in agent or not hash_sign:
        return name
    return f"{agent}@{device}#{session}"


def wire_sender(sender: str, device: str) -> str:
    """The sender as other machines read it: always qualified, even the bare agent name
    (a cron job writes as `nightly`; elsewhere it is `nightly@laptop`)."""
    agent, hash_sign, session = sender.partition("#")
    if "@" in agent:
        raise EnvelopeError(f"{sender!r} is already a remote name: it is not this machine's")
    return f"{agent}@{device}{hash_sign}{session}"


def landed_name(name: str, device: str) -> str:
    """A name as it lands on `device`: `web-app@device` → `web-app`, `x@device#s` → `x#s`;
    every other name unchanged."""
    agent, hash_sign, session = name.partition("#")
    base, at_sign, where = agent.partition("@")
    if at_sign and where == device:
        return f"{base}{hash_sign}{session}"
    return name


def seal_entry(
    key: bytes,
    *,
    device: str,
    id: uuid.UUID,
    room: str,
    ts: datetime,
    sender: str,
    type: str,
    to: list[str],
    re: uuid.UUID | None,
    content: str,
    meta: dict,
) -> dict:
    """The envelope of a stored entry, for the relay: routing fields in the clear,
    the rest sealed under the room key and bound to them."""
    routing = {"id": str(id), "sender": wire_sender(sender, device), "ts": iso_ms(ts)}
    body = {
        "type": type,
        "to": [wire_name(name, device) for name in to],
        "re": str(re) if re else None,
        "content": content,
        "meta": meta,
    }
    nonce, ciphertext = crypto.seal(key, body, room=room, **routing)
    return {**routing, "nonce": nonce, "ciphertext": ciphertext}


def seal_roster(
    key: bytes, *, device: str, room: str, id: uuid.UUID, ts: datetime,
    seats: list[tuple],
) -> dict:  # fmt: skip
    """The envelope of this machine's roster of a room: [(local seat, liveness[, focus])],
    a focus being {"text", "files", "phase", "ts"} or None (the seat has none)."""
    routing = {"id": str(id), "sender": f"@{device}", "ts": iso_ms(ts)}
    body = {"roster": [[wire_sender(seat[0], device), *seat[1:]] for seat in seats]}
    nonce, ciphertext = crypto.seal(key, body, room=room, **routing)
    return {**routing, "nonce": nonce, "ciphertext": ciphertext}


@dataclass(frozen=True)
class Roster:
    """Who is in the room on `device`, with the liveness of each (relay.state lands it),
    and the focus of each seat whose roster line carried one (None: it has none)."""

    device: str
    seats: list[tuple[str, str]]
    focus: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Landing:
    """What bus.services.entries.land_entry stores, from one opened envelope."""

    id: uuid.UUID
    room: str
    ts: datetime
    sender: str
    type: str
    to: list[str]
    re: uuid.UUID | None
    content: str
    meta: dict


def open_envelope(key: bytes, envelope: dict, *, room: str, device: str) -> Landing | Roster:
    """Open an envelope that arrived for `room` on this machine (`device`).

    Refuses (EnvelopeError) what does not decrypt with its own routing fields, and what
    is malformed once decrypted; the bus checks the values themselves when it lands."""
    try:
        id_text, sender, ts_text = envelope["id"], envelope["sender"], envelope["ts"]
        nonce, ciphertext = envelope["nonce"], envelope["ciphertext"]
    except (KeyError, TypeError):
        raise EnvelopeError(
            "the envelope lacks a field (id, sender, ts, nonce, ciphertext)"
        ) from None
    if not all(isinstance(v, str) for v in (id_text, sender, ts_text, nonce, ciphertext)):
        raise EnvelopeError("an envelope field is not text")
    try:
        body = crypto.open_sealed(
            key, nonce, ciphertext, id=id_text, room=room, sender=sender, ts=ts_text
        )
    except crypto.CryptoError as exc:
        raise EnvelopeError(str(exc)) from None
    try:
        entry_id = uuid.UUID(id_text)
        ts = datetime.fromisoformat(ts_text.replace("Z", "+00:00"))
    except ValueError:
        raise EnvelopeError("the envelope's id or time is malformed") from None
    sender_device = device_of(sender)
    if not sender_device or sender_device == device:
        raise EnvelopeError(f"the sender {sender[:80]!r} is not of another machine")
    if set(body) == {"roster"}:
        return _roster(body["roster"], sender, sender_device)
    if set(body) != set(BODY_FIELDS):
        raise EnvelopeError("the decrypted entry does not have the fields of an entry")
    to, re_text = body["to"], body["re"]
    if not isinstance(to, list) or not all(isinstance(n, str) for n in to):
        raise EnvelopeError("the decrypted entry's `to` is not a list of names")
    try:
        re = uuid.UUID(re_text) if re_text is not None else None
    except (ValueError, TypeError, AttributeError):
        raise EnvelopeError("the decrypted entry's `re` is not an entry id") from None
    return Landing(
        id=entry_id,
        room=room,
        ts=ts,
        sender=sender,
        type=body["type"] if isinstance(body["type"], str) else "",
        to=[landed_name(name, device) for name in to],
        re=re,
        content=body["content"],
        meta=body["meta"],
    )


def _roster(items: object, sender: str, device: str) -> Roster:
    if sender != f"@{device}":
        raise EnvelopeError(f"a roster is sent by its device (@{device}), not {sender[:80]!r}")
    if not isinstance(items, list) or not all(
        isinstance(item, list)
        and len(item) in (2, 3)
        and all(isinstance(v, str) for v in item[:2])
        and (len(item) == 2 or item[2] is None or _focus_shape(item[2]))
        for item in items
    ):
        raise EnvelopeError("the decrypted roster is not a list of [seat, liveness, focus]")
    for name, liveness, *_ in items:
        if device_of(name) != device or liveness not in rules.LIVENESS:
            raise EnvelopeError(f"the roster of {device!r} names {name[:80]!r} ({liveness[:16]})")
    return Roster(
        device=device,
        seats=[(item[0], item[1]) for item in items],
        focus={item[0]: item[2] for item in items if len(item) == 3},
    )


def _focus_shape(focus: object) -> bool:
    """{"text": str, "files": [str], "phase": str, "ts": str|None}; the bus checks the
    values when the roster lands."""
    return (
        isinstance(focus, dict)
        and set(focus) == {"text", "files", "phase", "ts"}
        and isinstance(focus["text"], str)
        and isinstance(focus["files"], list)
        and all(isinstance(f, str) for f in focus["files"])
        and isinstance(focus["phase"], str)
        and (focus["ts"] is None or isinstance(focus["ts"], str))
    )
