"""`salon hook session-start|stop|heartbeat|session-end|mcp-headers`: Claude Code's hooks.

The `salon` script hands a hook to mcpgate.claude.runner before it reads any setting
(salon/cli.py), so even a malformed setting cannot fail a turn; through `python manage.py
hook …` this command does the same once Django is set up.
"""

from __future__ import annotations

import os
import sys

from bus.management.base import BusCommand


class Command(BusCommand):
    help = (
        "Claude Code hooks: session-start (check in, say who you are, what waits and how to "
        "watch), stop (hold the turn for an entry that is a claim on you and was not told "
        "yet), heartbeat (a sign of life at most once a minute), session-end (sign the seat "
        "off); mcp-headers (the HTTP server's headersHelper: names the session). Reads the "
        "hook JSON on stdin; always exits 0."
    )

    def run_from_argv(self, argv):
        from django.conf import settings

        from mcpgate.claude.runner import run_hook
        from salond.host import own_store
        from salond.line import Line

        sys.exit(
            run_hook(
                argv[2:],
                environment=lambda: dict(os.environ),
                line_for=lambda values: Line(
                    own_store(), settings.SETTINGS_KEY, default_store=settings.DEFAULT_STORE
                ),
            )
        )

    def add_arguments(self, parser):
        parser.add_argument(
            "kind",
            choices=[
                "session-start",
                "stop",
                "heartbeat",
                "pre-edit",
                "session-end",
                "prompt-submit",
                "mcp-headers",
            ],
        )
