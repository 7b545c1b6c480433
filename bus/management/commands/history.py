"""`salon history ROOM [N] [--from NAME]`: the last N entries, own included, never clipped."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = (
        "Show the last N entries of ROOM (default 20), your own included, never clipped; "
        "the cursor does not move."
    )

    def add_arguments(self, parser):
        parser.add_argument("room", type=cli.room_arg, help="the room")
        parser.add_argument(
            "count",
            metavar="N",
            type=cli.count_arg,
            nargs="?",
            default=20,
            help="how many entries (default 20)",
        )
        parser.add_argument(
            "--from",
            dest="sender",
            type=cli.sender_arg,
            metavar="NAME",
            help="only entries by this seat or agent",
        )
        cli.add_json_flag(parser)

    def handle(self, *, room, count, sender, json, **options):
        from bus import services

        history = services.read_history(seat=cli.my_seat(), room=room, limit=count, sender=sender)
        if json:
            self.emit_json(history)
        elif history["entries"]:
            self.say(cli.format_entries(history["entries"]))
            if history["tampered"]:
                self.say("\n" + cli.tampered_warning(history["tampered"]))
        else:
            self.say(f"no entries in {history['room']}" + (f" from {sender}" if sender else ""))
