"""`salon where`: which store, secret and data directory are in use, and its servers.

`salon where` and `manage.py where` are answered by salon.cli without Django (run_where);
this command is what Django's own dispatcher lists and calls."""

from __future__ import annotations

import json as jsonlib

from bus.management.base import SalonCommand
from salon import config, store


class Command(SalonCommand):
    help = store.WHERE_HELP

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="one JSON document")

    def handle(self, *, json: bool = False, **options):
        found = store.describe(config.merged_environment())
        if json:
            self.stdout.write(jsonlib.dumps(found))
        else:
            self.stdout.write("\n".join(store.describe_lines(found)))
