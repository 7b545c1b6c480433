"""rooms, join, part."""

from __future__ import annotations

from bus.management.verbs import formats, types
from bus.management.verbs.base import Output, UsageError, Verb, add_json_flag


class Rooms(Verb):
    name = "rooms"
    summary = "list, create, archive or restore rooms"
    help = (
        "List rooms (entries, seats, live seats), or create, archive (refused while a live "
        "seat is in it, unless --force), list archived, or restore one."
    )
    speaks_for_a_seat = False

    def add_arguments(self, parser):
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--create", type=types.room_arg, metavar="ROOM", help="create ROOM")
        action.add_argument(
            "--archive",
            type=types.room_arg,
            metavar="ROOM",
            help="retire ROOM (its entries are kept, hidden from lists)",
        )
        action.add_argument("--archived", action="store_true", help="list archived rooms")
        action.add_argument(
            "--restore", type=types.room_arg, metavar="ROOM", help="bring an archived room back"
        )
        parser.add_argument(
            "--force", action="store_true", help="with --archive: even while live seats are in it"
        )
        add_json_flag(parser)

    def arguments(self, options):
        if options.force and not options.archive:
            raise UsageError("--force goes with --archive ROOM only")
        return {
            "create": options.create,
            "archive": options.archive,
            "archived": options.archived,
            "restore": options.restore,
            "force": options.force,
        }

    def show(self, result, options, out: Output):
        if options.json:
            out.emit_json(result)
        elif options.create:
            name = result["room"]
            out.say(f"created room {name}" if result["created"] else f"room {name} exists already")
        elif options.archive:
            out.say(
                f"archived room {options.archive} "
                f"({formats.plural(result['entriesKept'], 'entry', 'entries')} kept; "
                f"`salon rooms --restore {options.archive}` brings it back)"
            )
        elif options.restore:
            out.say(f"restored room {options.restore}")
        else:
            out.say(formats.format_rooms(result, archived=options.archived))


class Join(Verb):
    name = "join"
    summary = "join a room"
    help = "Join ROOM as this seat (--create makes the room if it does not exist)."

    def add_arguments(self, parser):
        parser.add_argument("room", type=types.room_arg, help="the room to join")
        parser.add_argument(
            "--create", action="store_true", help="create the room if it does not exist"
        )
        add_json_flag(parser)

    def arguments(self, options):
        return {"room": options.room, "create": options.create}

    def show(self, result, options, out: Output):
        if options.json:
            out.emit_json(result)
        else:
            made = " (created it)" if result["created"] else ""
            out.say(f"{result['seat']} is in room {result['room']}{made}")


class Part(Verb):
    name = "part"
    summary = "leave a room"
    help = "Leave ROOM as this seat; other seats of the agent stay."

    def add_arguments(self, parser):
        parser.add_argument("room", type=types.room_arg, help="the room to leave")
        add_json_flag(parser)

    def arguments(self, options):
        return {"room": options.room}

    def show(self, result, options, out: Output):
        if options.json:
            out.emit_json(result)
        else:
            out.say(f"{result['seat']} left room {result['room']}")


VERBS = [Rooms(), Join(), Part()]
