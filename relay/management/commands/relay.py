"""`salon relay use|status|serve|bridge|sync|revoke|join`: the relay between machines
(docs/RELAY.md).

`salon relay sync` exits 0 when every bridged room was pushed and pulled, 1 when the
relay refused or could not be reached (the error is printed, and shown by `salon rooms`
until a push and a pull succeed), 3 when entries still wait for the relay's rate window
(run it again later)."""

from __future__ import annotations

import asyncio
import json

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from bus.management.base import SalonCommand, SalonParser
from bus.management.verbs import formats
from relay import handshake

ACTIONS = {
    "use": "keep the relay's URL and secret on this machine (the operator's)",
    "status": "this machine's bridged rooms and the relay's side of each",
    "serve": "run this agent-salon as a relay (needs AGENT_SALON_RELAY_SECRET)",
    "bridge": "carry the bridged rooms when no daemon runs (the daemon does it otherwise)",
    "sync": "push and pull every bridged room once, then exit (cron, CI)",
    "revoke": "end one device's tokens on the relay (the operator's machine)",
    "join": "redeem a salon-join: string (also `salon join salon-join:…`)",
}


def _ago(ts: str | None) -> str:
    from datetime import UTC, datetime

    return formats.ago(ts, datetime.now(UTC).isoformat()) if ts else "never"


class Command(SalonCommand):
    help = "The relay between machines: use, status, serve, bridge, join."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(
            dest="action", required=True, metavar="ACTION", parser_class=SalonParser
        )
        for name, text in ACTIONS.items():
            sub = actions.add_parser(name, help=text, description=text, allow_abbrev=False)
            getattr(self, f"arguments_{name}")(sub)

    def arguments_use(self, parser):
        parser.add_argument("url", help="the relay's URL, e.g. https://relay.example.org")
        parser.add_argument("--secret", required=True, help="the relay's AGENT_SALON_RELAY_SECRET")
        parser.add_argument("--device", help="this machine's name on the relay (host name)")

    def arguments_status(self, parser):
        parser.add_argument("--json", action="store_true", help="one JSON document on stdout")

    def arguments_serve(self, parser):
        parser.add_argument("--bind", help=f"address to listen on (default {settings.BIND})")
        parser.add_argument("--port", type=int, help=f"TCP port (default {settings.PORT})")
        parser.add_argument("--workers", type=int, default=1, help="daphne processes")
        parser.add_argument("--no-migrate", action="store_true", help="skip migrations")

    def arguments_bridge(self, parser):
        pass

    def arguments_sync(self, parser):
        parser.add_argument("--json", action="store_true", help="one JSON document on stdout")

    def arguments_revoke(self, parser):
        parser.add_argument("device", help="the device to revoke, as `salon relay status` names it")

    def arguments_join(self, parser):
        parser.add_argument(
            "join", metavar="salon-join:…", help="the string `salon invite` printed"
        )

    def prefix(self, argv: list[str]) -> str:
        return " ".join(["salon", *argv[1:3]])

    def handle(self, *args, action: str, **options):
        try:
            getattr(self, f"do_{action}")(**options)
        except handshake.UnusableInput as exc:
            raise CommandError(str(exc), returncode=2) from None
        except handshake.HandshakeError as exc:
            raise CommandError(str(exc)) from None

    # -- the actions ------------------------------------------------------------------

    def do_use(self, *, url, secret, device=None, **options):
        done = handshake.use(url, secret, device)
        self.stdout.write(
            f"this machine uses the relay {done['relay']} as {done['device']} "
            f"(secret and keys in {done['keys']}, mode 600); "
            "invite another machine with `salon invite ROOM --for DEVICE`"
        )

    def do_join(self, *, join, **options):
        done = handshake.join(join)
        made = " (created it here)" if done["created"] else ""
        self.stdout.write(
            f"room {done['room']} is bridged{made} through {done['relay']} as "
            f"{done['device']}; a running daemon carries it (or run `salon relay bridge`), "
            f"and sessions join it with `salon join {done['room']}`"
        )

    def do_status(self, **options):
        result = handshake.status()
        if options.get("json"):
            self.stdout.write(_dumps(result))
            return
        if not result["relay"]:
            self.stdout.write(
                "this machine uses no relay (`salon relay use URL --secret S`, or "
                "`salon join salon-join:…`)"
            )
            return
        self.stdout.write(f"relay {result['relay']} · this machine: {result['device']}")
        if result["error"]:
            self.stderr.write(f"the relay did not answer: {result['error']}")
        for room in result["rooms"]:
            here, there = room["here"], room["relay"]
            self.stdout.write(f"{room['room']}")
            if here:
                self.stdout.write(f"  here : {formats.format_bridge(here)}")
            if there:
                devices = ", ".join(
                    f"{d['device']} ({d['behind']} behind, seen {_ago(d['lastSeen'])})"
                    for d in there["devices"]
                )
                self.stdout.write(
                    f"  relay: {there['entries']} entries, {there['bytes']} bytes held · "
                    f"devices: {devices or 'none'}"
                )
        others = sorted(set(result["relayRooms"] or []) - {r["room"] for r in result["rooms"]})
        if others:
            self.stdout.write(f"(the relay also carries: {', '.join(others)})")

    def do_serve(self, *, bind=None, port=None, workers=1, no_migrate=False, **options):
        if not settings.RELAY_SECRET:
            raise CommandError(
                "relay mode needs AGENT_SALON_RELAY_SECRET (16 characters or more, e.g. "
                "`openssl rand -hex 32`); give the same value to `salon relay use`"
            )
        self.stdout.write(
            "relay mode: /relay/v1/ and /healthz only · retention "
            f"{settings.RELAY_RETENTION_HOURS} h · at most {settings.RELAY_RATE} entries a "
            f"minute per device, {settings.RELAY_ROOM_ENTRIES} entries and "
            f"{settings.RELAY_ROOM_BYTES} bytes per room"
        )
        call_command(
            "serve", bind=bind, port=port, workers=workers, no_migrate=no_migrate, relay_only=True
        )

    def do_revoke(self, *, device, **options):
        done = handshake.revoke(device)
        rooms = ", ".join(done["rooms"])
        self.stdout.write(
            f"device {done['device']} is revoked on {done['relay']} (rooms: {rooms}): its "
            "tokens and every invite made for it until now are refused; a new invite "
            f"(`salon invite ROOM --for {done['device']}`) brings it back"
        )

    def do_sync(self, **options):
        from relay.bridge import sync_once
        from relay.keys import KeysError

        try:
            result = asyncio.run(sync_once())
        except KeysError as exc:
            raise CommandError(str(exc)) from None
        if not result["relay"] or not result["rooms"]:
            raise CommandError(
                "this machine bridges no room (`salon join salon-join:…`, or `salon invite`)"
            )
        if options.get("json"):
            self.stdout.write(_dumps(result))
        failed = [r for r in result["rooms"] if r["error"]]
        waiting = [r for r in result["rooms"] if (r.get("bridge") or {}).get("waiting")]
        if not options.get("json"):
            for room in result["rooms"]:
                self.stdout.write(_synced(room))
        if failed:
            raise CommandError(
                f"{len(failed)} of {len(result['rooms'])} room(s) did not sync: "
                + "; ".join(f"{r['room']}: {r['error']}" for r in failed)
            )
        if waiting:
            self.stderr.write(
                "entries still wait for the relay's rate window: run `salon relay sync` "
                "again in a minute"
            )
            raise SystemExit(3)

    def do_bridge(self, **options):
        from relay.bridge import run_alone

        self.stdout.write("bridging this store's rooms; Ctrl-C stops")
        self.stdout.flush()
        asyncio.run(run_alone())


def _synced(room: dict) -> str:
    if room.get("held"):
        return f"{room['room']}: not synced here: {room['held']}"
    if room["error"]:
        return f"{room['room']}: error: {room['error']}"
    words = f"{room['room']}: {room['pushed']} sent, {room['landed']} received"
    left = (room.get("bridge") or {}).get("waiting")
    return words + (f", {left} still waiting (the relay's rate)" if left else "")


def _dumps(data) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1)
