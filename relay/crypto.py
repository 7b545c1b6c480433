"""The relay's cryptography, in one place: pure functions, no Django, no database.

* Sealing an entry: AES-256-GCM (cryptography's AESGCM) under the room's key, a fresh
  96-bit nonce per entry, and the entry id, room, sender seat and time bound as
  additional authenticated data. The relay stores those four in the clear to route and
  order entries; if it changes any of them, opening fails.
* Invites and status passes: a JSON claim signed with HMAC-SHA256 under the relay secret,
  made on the operator's machine and checked by the relay (the secret never travels).
* Device tokens: random, and stored by the relay only as an HMAC of the token keyed with
  the relay secret, so that rotating the secret revokes every device at once.
* The `salon-join:` string: what the operator hands over out of band (relay URL, room,
  room key, invite).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bus import strict

AAD_LABEL = "agent-salon/relay/1"
INVITE_LABEL = "agent-salon/invite/1"
JOIN_PREFIX = "salon-join:"
KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # 96 bits, GCM's own size
TOKEN_PREFIX = "srd1_"


class CryptoError(ValueError):
    """Something sealed or signed does not check out; the message says what."""


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def unb64(text: str, what: str) -> bytes:
    if not isinstance(text, str) or len(text) > 1 << 22:
        raise CryptoError(f"{what} is not base64 text")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise CryptoError(f"{what} is not base64 text") from None


# ---------------------------------------------------------------- entries


def new_room_key() -> bytes:
    return AESGCM.generate_key(bit_length=256)


def associated_data(*, id: str, room: str, sender: str, ts: str) -> bytes:
    """What the ciphertext is bound to: the fields the relay sees in the clear."""
    return json.dumps([AAD_LABEL, id, room, sender, ts], ensure_ascii=False).encode()


def seal(key: bytes, body: dict, *, id: str, room: str, sender: str, ts: str) -> tuple[str, str]:
    """Encrypt an entry's body; returns (nonce, ciphertext), both base64url."""
    nonce = os.urandom(NONCE_BYTES)
    plain = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    aad = associated_data(id=id, room=room, sender=sender, ts=ts)
    return b64(nonce), b64(AESGCM(key).encrypt(nonce, plain, aad))


def open_sealed(
    key: bytes, nonce: str, ciphertext: str, *, id: str, room: str, sender: str, ts: str
) -> dict:
    """Decrypt and authenticate an entry's body; CryptoError if anything was changed."""
    raw_nonce = unb64(nonce, "the nonce")
    if len(raw_nonce) != NONCE_BYTES:
        raise CryptoError(f"the nonce is {len(raw_nonce)} bytes, not {NONCE_BYTES}")
    aad = associated_data(id=id, room=room, sender=sender, ts=ts)
    try:
        plain = AESGCM(key).decrypt(raw_nonce, unb64(ciphertext, "the ciphertext"), aad)
    except InvalidTag:
        raise CryptoError(
            "the entry does not decrypt under this room's key with its id, room, sender "
            "and time: it was changed on the way, or sealed with another key"
        ) from None
    try:
        body = strict.decode_json(plain)  # the rules of every other door (bus.strict)
    except strict.NotJson as exc:
        raise CryptoError(f"the decrypted entry is not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise CryptoError("the decrypted entry is not a JSON object")
    return body


# ---------------------------------------------------------------- signed claims


@dataclass(frozen=True)
class Claim:
    """A signed invite or status pass, as the relay reads it."""

    kind: str  # "join" or "status"
    id: str  # random; an invite's id is what makes it single-use
    expires: int  # Unix time
    room: str = ""
    device: str = ""
    # When it was made, in milliseconds of the operator's clock (0: a claim made before
    # this was kept). A revoke pass's is compared with an invite's: one clock, no skew.
    issued: int = 0


def sign_claim(secret: str, claim: Claim) -> str:
    fields = {"k": claim.kind, "id": claim.id, "exp": claim.expires, "r": claim.room,
              "d": claim.device}  # fmt: skip
    if claim.issued:
        fields["iat"] = claim.issued
    payload = b64(json.dumps(fields, separators=(",", ":")).encode())
    return f"{payload}.{b64(_mac(secret, payload))}"


def make_claim(secret: str, *, kind: str, ttl: int, now: float, room="", device="") -> str:
    claim = Claim(kind, secrets.token_hex(16), int(now) + ttl, room, device, int(now * 1000))
    return sign_claim(secret, claim)


def _mac(secret: str, payload: str) -> bytes:
    return hmac.new(secret.encode(), f"{INVITE_LABEL}.{payload}".encode(), hashlib.sha256).digest()


def read_claim(text: str) -> Claim:
    """The claim of an invite or pass, unchecked (the joining side reads its device)."""
    payload, dot, _ = text.partition(".") if isinstance(text, str) else ("", "", "")
    if not dot:
        raise CryptoError("the invite is malformed (no signature part)")
    try:
        # Read before its MAC is checked: by bus.strict's rules, like any outside input.
        data = strict.decode_json(unb64(payload, "the invite"))
        claim = Claim(
            kind=data["k"],
            id=data["id"],
            expires=data["exp"],
            room=data["r"],
            device=data["d"],
            issued=data.get("iat", 0),
        )
    except (ValueError, KeyError, TypeError):
        raise CryptoError("the invite is malformed (its claim is not readable)") from None
    if not all(isinstance(v, str) for v in (claim.kind, claim.id, claim.room, claim.device)):
        raise CryptoError("the invite is malformed (a field is not text)")
    for number in (claim.expires, claim.issued):
        if not isinstance(number, int) or isinstance(number, bool):
            raise CryptoError("the invite is malformed (its expiry or issue time is not a number)")
    return claim


def check_claim(secret: str, text: str, *, kind: str, now: float) -> Claim:
    """A claim signed with `secret`, of `kind`, not expired; CryptoError otherwise."""
    claim = read_claim(text)
    payload, _, signature = text.partition(".")
    if not hmac.compare_digest(_mac(secret, payload), unb64(signature, "the signature")):
        raise CryptoError(
            "the invite's signature does not match this relay's secret: it was made for "
            "another relay, altered, or the relay's secret has changed since"
        )
    if claim.kind != kind:
        raise CryptoError(f"this is a {claim.kind!r} pass, not a {kind!r} one")
    if claim.expires <= now:
        raise CryptoError("the invite has expired: ask for a new one (salon invite …)")
    return claim


# ---------------------------------------------------------------- device tokens


def new_device_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(secret: str, token: str) -> str:
    """How the relay stores a device token: keyed with its secret (rotation revokes)."""
    return hmac.new(secret.encode(), token.encode(), hashlib.sha256).hexdigest()


# ---------------------------------------------------------------- the join string


@dataclass(frozen=True)
class JoinTicket:
    relay: str
    room: str
    key: bytes
    invite: str


def join_string(ticket: JoinTicket) -> str:
    body = {
        "v": 1,
        "relay": ticket.relay,
        "room": ticket.room,
        "key": b64(ticket.key),
        "invite": ticket.invite,
    }
    return JOIN_PREFIX + b64(json.dumps(body, separators=(",", ":")).encode())


def parse_join_string(text: str) -> JoinTicket:
    """A `salon-join:…` string, checked for shape (the relay checks the invite)."""
    if not isinstance(text, str) or not text.startswith(JOIN_PREFIX):
        raise CryptoError(f"a join string starts with {JOIN_PREFIX!r}")
    try:
        data = strict.decode_json(unb64(text[len(JOIN_PREFIX) :].strip(), "the join string"))
    except ValueError:
        raise CryptoError("the join string is damaged (copy it whole, on one line)") from None
    if not isinstance(data, dict) or data.get("v") != 1:
        raise CryptoError("the join string is not one this version of agent-salon reads")
    fields = ("relay", "room", "key", "invite")
    if set(data) != {"v", *fields} or not all(isinstance(data[f], str) for f in fields):
        raise CryptoError("the join string is damaged (its fields are not as expected)")
    key = unb64(data["key"], "the room key")
    if len(key) != KEY_BYTES:
        raise CryptoError("the join string's room key is not a 256-bit key")
    return JoinTicket(relay=data["relay"], room=data["room"], key=key, invite=data["invite"])
