"""The handshake commands, `salon relay use`, `salon invite` and `salon join salon-join:…`,
and `salon relay status`: what they do, with Django set up (relay.management has the
command lines).

* `use URL --secret S [--device NAME]`, on the operator's machine: checks that a relay
  answers at URL and accepts S, then keeps URL, S and this machine's device name in the
  keys file (mode 600). The secret never leaves this machine: it signs invites here.
* `invite ROOM --for DEVICE [--ttl S]`: bridges ROOM from this machine first if it is not
  yet (a room key is made, and a device token for this machine), then prints a
  `salon-join:` string: the relay URL, the room, the room key and a single-use invite for
  DEVICE, valid S seconds (900). It carries the room key: hand it over out of band.
* `join salon-join:…`, on the other machine: redeems the invite for a device token,
  creates the room here if need be, keeps the key and the token (mode 600) and bridges
  the room. The machine is DEVICE on the relay from then on.

A room bridged by a handshake carries what is written from then on; its earlier entries
stay on the machine they were written on.
"""

from __future__ import annotations

import re
import socket
import time

from bus import rules, services
from bus.models import Room
from relay import client, crypto, keys, state
from relay.envelope import check_device_name

DEFAULT_TTL = 900
MAX_TTL = 7 * 24 * 3600
STATUS_PASS_SECONDS = 60


class HandshakeError(Exception):
    """A refusal: one line saying what was wrong and how to fix it."""


class UnusableInput(HandshakeError):
    """What was typed cannot be used as given (a usage error: exit status 2)."""


def default_device() -> str:
    """This machine's name as a device name: the host name's first label, cleaned."""
    label = socket.gethostname().split(".")[0]
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", label).strip("-")[:64]
    return name or "device"


def _refusal(exc: client.RelayError) -> HandshakeError:
    return HandshakeError(f"the relay refused: {exc.message}" if exc.status else exc.message)


def _keys() -> keys.Keys:
    try:
        return keys.load()
    except keys.KeysError as exc:
        raise HandshakeError(str(exc)) from None


def _device(name: str) -> str:
    try:
        return check_device_name(name)
    except rules.RuleError as exc:
        raise UnusableInput(str(exc)) from None


# ---------------------------------------------------------------- use


def use(url: str, secret: str, device: str | None = None) -> dict:
    try:
        url = client.normalize_url(url)
    except client.RelayError as exc:
        raise UnusableInput(exc.message) from None
    if not secret or len(secret) < 16:
        raise UnusableInput(
            "--secret is the relay's AGENT_SALON_RELAY_SECRET (16 characters or more)"
        )
    current = _keys()
    device = _device(device or current.device or default_device())
    if current.rooms and (current.relay, current.device) != (url, device):
        raise HandshakeError(
            f"this machine bridges {', '.join(sorted(current.rooms))} through "
            f"{current.relay} as {current.device}; a machine uses one relay under one name"
        )
    try:
        client.hello(url)
        pass_ = crypto.make_claim(secret, kind="status", ttl=STATUS_PASS_SECONDS, now=time.time())
        client.relay_status(url, pass_)
    except client.RelayError as exc:
        if exc.status == 403:
            raise HandshakeError(
                f"the relay at {url} does not accept this secret: give the value of its "
                "AGENT_SALON_RELAY_SECRET"
            ) from None
        raise _refusal(exc) from None
    try:
        with keys.editing() as edited:
            edited.relay, edited.secret, edited.device = url, secret, device
    except keys.KeysError as exc:
        raise HandshakeError(str(exc)) from None
    return {"relay": url, "device": device, "keys": str(keys.default_path())}


# ---------------------------------------------------------------- invite


def invite(room: str, for_device: str, ttl: int = DEFAULT_TTL) -> dict:
    current = _keys()
    if not (current.relay and current.secret):
        raise HandshakeError(
            "this machine has no relay to invite to: run `salon relay use URL --secret S` "
            "first (on the machine that knows the relay's secret)"
        )
    for_device = _device(for_device)
    if for_device == current.device:
        raise HandshakeError(
            f"{for_device!r} is this machine's own device name: invite the other machine "
            "by its name (--for laptop)"
        )
    if not 1 <= ttl <= MAX_TTL:
        raise UnusableInput(f"--ttl is 1 to {MAX_TTL} seconds (default {DEFAULT_TTL})")
    try:
        room_row = services.rooms.get_room(room)
    except rules.RuleError as exc:
        raise HandshakeError(str(exc)) from None
    if room_row.name not in current.rooms:
        _bridge_here(current, room_row)
    room_key = _keys().rooms[room_row.name].key
    now = time.time()
    invite_text = crypto.make_claim(
        current.secret, kind="join", ttl=ttl, now=now, room=room_row.name, device=for_device
    )
    ticket = crypto.JoinTicket(relay=current.relay, room=room_row.name, key=room_key,
                               invite=invite_text)  # fmt: skip
    return {
        "join": crypto.join_string(ticket),
        "room": room_row.name,
        "device": for_device,
        "relay": current.relay,
        "expiresIn": ttl,
    }


def _bridge_here(current: keys.Keys, room_row) -> None:
    """The operator's own machine joins the room first, with an invite it makes itself."""
    self_invite = crypto.make_claim(
        current.secret, kind="join", ttl=60, now=time.time(), room=room_row.name,
        device=current.device,
    )  # fmt: skip
    try:
        token = client.redeem(current.relay, self_invite)["token"]
    except client.RelayError as exc:
        raise _refusal(exc) from None
    with keys.editing() as edited:
        edited.rooms[room_row.name] = keys.RoomKeys(key=crypto.new_room_key(), token=token)
    state.bridge_room(room_row, relay=current.relay, device=current.device)


# ---------------------------------------------------------------- join


def join(text: str) -> dict:
    try:
        ticket = crypto.parse_join_string(text)
        claim = crypto.read_claim(ticket.invite)
        relay = client.normalize_url(ticket.relay)
        rules.validate_name(ticket.room, "room")
    except (crypto.CryptoError, client.RelayError, rules.RuleError) as exc:
        raise UnusableInput(f"this join string cannot be used: {exc}") from None
    if claim.room != ticket.room:
        # The relay grants the invite's room, never the string's: bridging the string's
        # room would fail on every push and pull, for good. Refused before it is spent.
        raise UnusableInput(
            f"this join string cannot be used: it names room {ticket.room!r}, but its "
            f"signed invite is for room {claim.room!r}; use the string `salon invite` "
            "printed, unchanged"
        )
    device = _device(claim.device)
    current = _keys()
    if current.device and current.device != device:
        raise HandshakeError(
            f"this machine is {current.device!r} on its relay, and the invite is for "
            f"{device!r}: ask for an invite --for {current.device}"
        )
    if current.relay and current.relay != relay and current.rooms:
        raise HandshakeError(
            f"this machine bridges its rooms through {current.relay}; the invite is for "
            f"{relay} (a machine uses one relay)"
        )
    if claim.expires <= time.time():
        raise HandshakeError("the invite has expired: ask for a new one (salon invite …)")
    if Room.objects.filter(name=ticket.room, archived_at__isnull=False).exists():
        # Refused before the invite is spent on the relay.
        raise HandshakeError(
            f"room {ticket.room!r} is archived here; bring it back with "
            f"`salon rooms --restore {ticket.room}`, then join again"
        )
    try:
        token = client.redeem(relay, ticket.invite)["token"]
    except client.RelayError as exc:
        raise _refusal(exc) from None
    try:
        room_row, created = services.rooms.create_room(name=ticket.room)
    except rules.RuleError as exc:
        raise HandshakeError(str(exc)) from None
    with keys.editing() as edited:
        edited.relay, edited.device = relay, device
        edited.rooms[room_row.name] = keys.RoomKeys(key=ticket.key, token=token)
    state.bridge_room(room_row, relay=relay, device=device)
    return {"room": room_row.name, "relay": relay, "device": device, "created": created}


# ---------------------------------------------------------------- revoke


def revoke(device: str) -> dict:
    """`salon relay revoke DEVICE`, on the operator's machine: the relay ends every token
    of DEVICE, in every room, and every invite for it made until now. The other devices
    keep theirs; a new invite brings DEVICE back."""
    current = _keys()
    if not (current.relay and current.secret):
        raise HandshakeError(
            "only the machine that knows the relay's secret can revoke a device: run this "
            "where `salon relay use URL --secret S` was run"
        )
    device = _device(device)
    revoke_pass = crypto.make_claim(
        current.secret, kind="revoke", ttl=STATUS_PASS_SECONDS, now=time.time(), device=device
    )
    try:
        done = client.revoke(current.relay, revoke_pass)
    except client.RelayError as exc:
        raise _refusal(exc) from None
    return {**done, "relay": current.relay}


# ---------------------------------------------------------------- status


def status() -> dict:
    """This machine's bridged rooms, and the relay's side of each: every room when this
    is the operator's machine (it holds the secret), else each bridged room's own view."""
    current = _keys()
    local = {b.room.name: b.status() for b in state.bridged_rooms()}
    result: dict = {"relay": current.relay or None, "device": current.device or None,
                    "rooms": [], "relayRooms": None, "error": None}  # fmt: skip
    if not current.relay:
        return result
    views: dict[str, dict] = {}
    try:
        if current.secret:
            pass_ = crypto.make_claim(
                current.secret, kind="status", ttl=STATUS_PASS_SECONDS, now=time.time()
            )
            relay_view = client.relay_status(current.relay, pass_)
            views = {room["room"]: room for room in relay_view["rooms"]}
            result["limits"] = relay_view.get("limits")
            result["relayRooms"] = sorted(views)
        else:
            for name, room_keys in sorted(current.rooms.items()):
                view = client.room_view(current.relay, name, room_keys.token)
                result["limits"] = view.pop("limits", None)
                views[name] = view
    except client.RelayError as exc:
        result["error"] = exc.message
    for name in sorted(set(current.rooms) | set(local)):
        result["rooms"].append({"room": name, "here": local.get(name), "relay": views.get(name)})
    return result
