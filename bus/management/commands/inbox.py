"""`salon inbox ROOM`: the entries by others since this seat's cursor (SPEC §6)."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = (
        "Read ROOM: the oldest unread entries by others (at most --limit, default 20), "
        "and move this seat's cursor over exactly those."
    )
    advance = True

    def add_arguments(self, parser):
        parser.add_argument("room", type=cli.room_arg, help="the room to read")
        parser.add_argument(
            "--limit", type=cli.count_arg, default=20, metavar="N", help="at most N entries"
        )
        cli.add_json_flag(parser)

    def handle(self, *, room, limit, json, **options):
        from bus import services

        inbox = services.read_inbox(
            seat=cli.my_seat(), room=room, limit=limit, advance=self.advance
        )
        if json:
            self.emit_json(inbox)
        else:
            self.say(self.summary(inbox))

    def summary(self, inbox: dict) -> str:
        parts = [cli.format_entries(inbox["entries"])] if inbox["entries"] else []
        if inbox["more"]:
            again = "salon inbox" if self.advance else "salon peek"
            parts.append(
                f"({inbox['more']} more unread in {inbox['room']}: run `{again} "
                f"{inbox['room']}` again)"
            )
        elif not inbox["entries"]:
            parts.append(f"nothing new in {inbox['room']} for {inbox['seat']}")
        if inbox["tampered"]:
            parts.append(cli.tampered_warning(inbox["tampered"]))
        return "\n\n".join(parts)
