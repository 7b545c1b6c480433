"""`salon hook session-start|stop|heartbeat`: Claude Code's hooks (SPEC §8).

Claude Code runs these with its hook JSON on stdin. The work is in bus.claude.run_hook
(the never-failing runner, with its fast paths) and bus.hooks (the Django side). Run as
`salon hook …` (what `salon install` writes), salon/cli.py hands over to run_hook before
any setting is read, so even a malformed setting cannot fail a turn; through
`python manage.py hook …` this command does the same once Django is set up.

A hook always exits 0; stdout holds the hook's JSON output or nothing; a failure is one
line in `agent-salon-hooks.log` in the data directory (see bus.claude).
"""

from __future__ import annotations

import sys

from bus.management.cli import BusCommand


class Command(BusCommand):
    help = (
        "Claude Code hooks: session-start (check in, say who you are and how to watch), "
        "stop (block once per waking entry not yet nudged about), heartbeat (a sign of "
        "life at most once a minute). Reads the hook JSON on stdin; always exits 0."
    )

    def run_from_argv(self, argv):
        from bus.claude import run_hook

        sys.exit(run_hook(argv[2:]))

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=["session-start", "stop", "heartbeat"])

    def handle(self, *, kind, **options):
        from bus.claude import run_hook

        run_hook([kind])
