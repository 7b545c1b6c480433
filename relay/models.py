"""The relay's tables: what a relay keeps (Relay*), and what a bridged machine keeps
(BridgedRoom). Both live in every store; a machine uses the ones of its role.

A relay holds ciphertext and routing metadata only (docs/RELAY.md): per envelope the
entry id, the sending device and seat, the time, the nonce and the sealed body.
"""

from __future__ import annotations

from django.db import models

from bus.models import Entry, Room
from bus.signing import iso_ms


class RelayRoom(models.Model):
    """A room as the relay knows it: its counter and what it holds.

    Ordering: an envelope's seq is taken from `last_seq` under this row's lock, in the
    storing transaction, so seq order is commit order on SQLite and PostgreSQL alike and
    a cursor never skips an envelope committed late.
    """

    name = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seq = models.BigIntegerField(default=0)
    # What the room holds now (retention takes away), for its ceilings.
    entries = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)
    # Every envelope up to this seq has been dropped by retention: a device whose cursor
    # is below it missed some.
    purged_seq = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return self.name


class RelayDevice(models.Model):
    """A machine's standing in one room: its token (stored as an HMAC keyed with the
    relay secret), its expiry, its cursor and its rate window."""

    room = models.ForeignKey(RelayRoom, on_delete=models.CASCADE, related_name="devices")
    name = models.CharField(max_length=64)
    token_hash = models.CharField(max_length=64, unique=True)
    joined_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    last_seen = models.DateTimeField(null=True, blank=True)
    cursor = models.BigIntegerField(default=0)  # the seq it last read up to
    pushed = models.BigIntegerField(default=0)
    # Rate: entries pushed since window_start (a fixed one-minute window).
    window_start = models.DateTimeField(null=True, blank=True)
    window_count = models.IntegerField(default=0)
    # `salon relay revoke DEVICE`: the token stops working, and so does every invite for
    # the device made before this moment; a newer invite brings it back.
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["room", "name"], name="relaydevice_one_per_room"),
        ]

    def __str__(self) -> str:
        return f"{self.name} in {self.room_id}"


class RelayInvite(models.Model):
    """An invite that was used: its id may never be used again (the unique constraint is
    the single-use rule, so two redemptions at once cannot both win)."""

    invite_id = models.CharField(max_length=64, unique=True)
    room = models.CharField(max_length=64)
    device = models.CharField(max_length=64)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"invite {self.invite_id} for {self.device} in {self.room}"


class RelayEnvelope(models.Model):
    """One sealed entry. `sender` and `ts` are kept exactly as sealed: they are bound to
    the ciphertext, so a changed one makes every reader refuse the entry."""

    room = models.ForeignKey(RelayRoom, on_delete=models.CASCADE, related_name="envelopes")
    seq = models.BigIntegerField()
    entry_id = models.UUIDField()
    device = models.CharField(max_length=64)
    sender = models.CharField(max_length=200)
    ts = models.CharField(max_length=32)
    nonce = models.CharField(max_length=32)
    ciphertext = models.BinaryField()
    size = models.IntegerField()
    stored_at = models.DateTimeField()

    class Meta:
        constraints = [
            # also the index of a pull: room = R AND seq > cursor ORDER BY seq
            models.UniqueConstraint(fields=["room", "seq"], name="relayenvelope_room_seq"),
            # a push repeated after a lost answer stores nothing twice
            models.UniqueConstraint(fields=["room", "entry_id"], name="relayenvelope_room_id"),
        ]
        indexes = [
            # retention: the envelopes stored before the cutoff
            models.Index(fields=["stored_at"], name="relayenvelope_by_stored_at"),
        ]

    def __str__(self) -> str:
        return f"{self.room_id}#{self.seq} from {self.device}"


class BridgedRoom(models.Model):
    """A room of this machine carried by the bridge: where it stands with the relay.

    The relay URL and this machine's device name are copied here for the listings; the
    room key and the device token live in the keys file (relay.keys, mode 600), never in
    the database.
    """

    room = models.OneToOneField(Room, on_delete=models.CASCADE, related_name="+")
    relay = models.CharField(max_length=300)
    device = models.CharField(max_length=64)
    bridged_at = models.DateTimeField(auto_now_add=True)
    cursor = models.BigIntegerField(default=0)  # the relay's seq read up to
    pushed_seq = models.BigIntegerField(default=0)  # this room's seq pushed up to
    pushed = models.BigIntegerField(default=0)
    landed = models.BigIntegerField(default=0)
    duplicates = models.BigIntegerField(default=0)  # arrived again, dropped by entry id
    refused = models.BigIntegerField(default=0)  # arrived and refused (did not decrypt …)
    last_refusal = models.TextField(blank=True, default="")
    rejected = models.BigIntegerField(default=0)  # pushed and refused by the relay
    missed = models.BigIntegerField(default=0)  # dropped by the relay's retention unread
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    # The last push and the last pull the relay answered: an error is cleared only once
    # both have succeeded after it.
    push_ok_at = models.DateTimeField(null=True, blank=True)
    pull_ok_at = models.DateTimeField(null=True, blank=True)
    # The roster last sent (relay.envelope): a digest of its seats and their liveness.
    roster_digest = models.CharField(max_length=64, blank=True, default="")
    roster_at = models.DateTimeField(null=True, blank=True)
    # One bridge of the store carries the room at a time (a daemon's workers, a
    # `salon relay bridge` beside a daemon): the holder renews its lease.
    lease_holder = models.CharField(max_length=64, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"room {self.room_id} via {self.relay}"

    def status(self) -> dict:
        """Where the bridge of this room stands, as `salon rooms` and `salon relay status`
        show it."""
        return {
            "relay": self.relay,
            "device": self.device,
            "lastSync": iso_ms(self.last_sync_at) if self.last_sync_at else None,
            "pushed": self.pushed,
            "landed": self.landed,
            "duplicates": self.duplicates,
            "refused": self.refused,
            "rejected": self.rejected,
            "missed": self.missed,
            "error": self.last_error or None,
            "errorAt": iso_ms(self.last_error_at) if self.last_error_at else None,
            "lastRefusal": self.last_refusal or None,
            # written here and not yet taken by the relay (a rate limit paces them)
            "waiting": Entry.objects.filter(room_id=self.room_id, seq__gt=self.pushed_seq)
            .exclude(via="relay")
            .count(),
        }
