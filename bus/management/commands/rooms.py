"""`salon rooms [--create R | --archive R [--force] | --archived | --restore R]` (SPEC §3)."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = (
        "List rooms (entries, seats, live seats), or create, archive (refused while a live "
        "seat is in it, unless --force), list archived, or restore one."
    )

    def add_arguments(self, parser):
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--create", type=cli.room_arg, metavar="ROOM", help="create ROOM")
        action.add_argument(
            "--archive",
            type=cli.room_arg,
            metavar="ROOM",
            help="retire ROOM (its entries are kept, hidden from lists)",
        )
        action.add_argument("--archived", action="store_true", help="list archived rooms")
        action.add_argument(
            "--restore", type=cli.room_arg, metavar="ROOM", help="bring an archived room back"
        )
        parser.add_argument(
            "--force", action="store_true", help="with --archive: even while live seats are in it"
        )
        cli.add_json_flag(parser)

    def handle(self, *, create, archive, archived, restore, force, json, **options):
        from bus import services

        if force and not archive:
            raise self.usage("--force goes with --archive ROOM only")
        if create:
            room, created = services.create_room(name=create)
            result = {"room": room.name, "created": created}
            text = f"created room {room.name}" if created else f"room {room.name} exists already"
        elif archive:
            result = services.archive_room(name=archive, force=force)
            text = (
                f"archived room {archive} "
                f"({cli.plural(result['entriesKept'], 'entry', 'entries')} kept; "
                f"`salon rooms --restore {archive}` brings it back)"
            )
        elif restore:
            result = services.restore_room(name=restore)
            text = f"restored room {restore}"
        else:
            result = services.list_rooms(archived=archived)
            text = cli.format_rooms(result, archived=archived)
        if json:
            self.emit_json(result)
        else:
            self.say(text)
