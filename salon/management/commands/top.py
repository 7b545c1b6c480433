"""`salon top [ROOM]`: the operator's terminal view (salon.top), full screen, read-only."""

from __future__ import annotations

import os
import sys

from bus import services
from bus.management.base import SalonCommand


class Command(SalonCommand):
    help = (
        "The operator's full-screen terminal view: the rooms, the seats of the selected "
        "room and the flow of entries with whom each wakes, all live. Tab between panes, "
        "j/k PgUp/PgDn Home/End to move (End follows), / search, f filter, Enter opens an "
        "entry, ? help, q quits. Reads only; works with or without a running server."
    )

    def add_arguments(self, parser):
        parser.add_argument("room", nargs="?", metavar="ROOM", help="the room opened first")

    def handle(self, *, room, **options):
        if not (os.isatty(sys.stdin.fileno()) and os.isatty(sys.stdout.fileno())):
            raise self.refuse(
                "needs a terminal (for a pipe or a log, `salon watch` prints the flow as lines)"
            )
        if room:  # an unknown room is refused in one line, naming the rooms that exist
            room = services.rooms.get_room(room).name
        from salon.top import run

        code = run(room)
        if code:
            sys.exit(code)
