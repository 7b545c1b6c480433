"""`salon where`: which store, secret and data directory are in use, and its servers."""

from __future__ import annotations

import json as jsonlib

from bus.management.base import SalonCommand
from salon import config, store


def lines(found: dict) -> list[str]:
    servers = found["servers"]
    running = (
        f"running (pid {', '.join(map(str, servers))})"
        if servers
        else "none running (commands and hooks work on the store themselves)"
    )
    return [
        f"store     {found['store']} ({found['engine']})",
        f"secret    {found['secret']}",
        f"data dir  {found['dataDir']}",
        f"servers   {running}",
    ]


class Command(SalonCommand):
    help = (
        "Say which store, secret and data directory this environment uses (every project "
        "and hook of a user meets in the same one unless told otherwise), and whether a "
        "server of the store (salon serve, salon mcp) is running."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="one JSON document")

    def handle(self, *, json: bool = False, **options):
        found = store.describe(config.merged_environment())
        if json:
            self.stdout.write(jsonlib.dumps(found))
        else:
            self.stdout.write("\n".join(lines(found)))
