"""`salon relay use|status|serve|bridge|join`: the relay between machines (docs/RELAY.md)."""

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
            "relay mode: /relay/v1/ · retention "
            f"{settings.RELAY_RETENTION_HOURS} h · at most {settings.RELAY_RATE} entries a "
            f"minute per device, {settings.RELAY_ROOM_ENTRIES} entries and "
            f"{settings.RELAY_ROOM_BYTES} bytes per room"
        )
        call_command("serve", bind=bind, port=port, workers=workers, no_migrate=no_migrate)

    def do_bridge(self, **options):
        from relay.bridge import run_alone

        self.stdout.write("bridging this store's rooms; Ctrl-C stops")
        self.stdout.flush()
        asyncio.run(run_alone())


def _dumps(data) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1)
