"""`salon join ROOM [--create]`: this seat becomes a reader of ROOM (SPEC §3)."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = "Join ROOM as this seat (--create makes the room if it does not exist)."

    def add_arguments(self, parser):
        parser.add_argument("room", type=cli.room_arg, help="the room to join")
        parser.add_argument(
            "--create", action="store_true", help="create the room if it does not exist"
        )
        cli.add_json_flag(parser)

    def handle(self, *, room, create, json, **options):
        from bus import services

        result = services.join_room(seat=cli.my_seat(), room=room, create=create)
        if json:
            self.emit_json(result)
        else:
            made = " (created it)" if result["created"] else ""
            self.say(f"{result['seat']} is in room {result['room']}{made}")
