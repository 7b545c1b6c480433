"""`salon unread ROOM [N]`: move this seat's cursor back over the last N entries read."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = "Mark the last N entries by others in ROOM unread again (default 1)."

    def add_arguments(self, parser):
        parser.add_argument("room", type=cli.room_arg, help="the room")
        parser.add_argument(
            "count",
            metavar="N",
            type=cli.count_arg,
            nargs="?",
            default=1,
            help="how many entries (default 1)",
        )
        cli.add_json_flag(parser)

    def handle(self, *, room, count, json, **options):
        from bus import services

        result = services.mark_unread(seat=cli.my_seat(), room=room, count=count)
        if json:
            self.emit_json(result)
        else:
            self.say(
                f"{cli.plural(result['markedUnread'], 'entry', 'entries')} of {result['room']} "
                f"unread again for {result['seat']}"
            )
