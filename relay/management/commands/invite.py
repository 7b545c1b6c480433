"""`salon invite ROOM --for DEVICE [--ttl S]`: a single-use invite into a bridged room."""

from __future__ import annotations

import json

from django.core.management.base import CommandError

from bus.management.base import SalonCommand
from relay import handshake


class Command(SalonCommand):
    help = (
        "Print a salon-join: string that lets machine DEVICE join ROOM through this "
        "machine's relay (bridging ROOM from here first). It carries the room key: hand "
        "it over out of band. Single use; valid --ttl seconds."
    )

    def add_arguments(self, parser):
        parser.add_argument("room", help="the room to invite into (it exists here)")
        parser.add_argument(
            "--for", dest="device", required=True, help="the other machine's device name"
        )
        parser.add_argument(
            "--ttl",
            type=int,
            default=handshake.DEFAULT_TTL,
            help=f"seconds the invite stays valid (default {handshake.DEFAULT_TTL})",
        )
        parser.add_argument("--json", action="store_true", help="one JSON document on stdout")

    def handle(self, *args, room, device, ttl, **options):
        try:
            made = handshake.invite(room, device, ttl)
        except handshake.HandshakeError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(made))
            return
        self.stdout.write(made["join"])
        self.stderr.write(
            f"on {made['device']}, run: salon join <the line above> (single use, valid "
            f"{made['expiresIn']} s; it carries room {made['room']}'s key: hand it over "
            f"out of band). Redeemed, it replaces any token {made['device']} holds for "
            f"{made['room']}: the old one stops working.",
            style_func=lambda s: s,
        )
