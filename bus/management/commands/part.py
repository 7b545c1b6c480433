"""`salon part ROOM`: this seat leaves ROOM (its default rooms are never re-added)."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = "Leave ROOM as this seat; other seats of the agent stay."

    def add_arguments(self, parser):
        parser.add_argument("room", type=cli.room_arg, help="the room to leave")
        cli.add_json_flag(parser)

    def handle(self, *, room, json, **options):
        from bus import services

        result = services.part_room(seat=cli.my_seat(), room=room)
        if json:
            self.emit_json(result)
        else:
            self.say(f"{result['seat']} left room {result['room']}")
