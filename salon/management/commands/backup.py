"""`salon backup DIR`: a consistent copy of the store, with its secret."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import CommandError

from bus.management.base import SalonCommand
from salon import config, store


class Command(SalonCommand):
    help = (
        "Write a consistent copy of the store (SQLite's online backup: the daemon and the "
        "hooks go on writing meanwhile) and its secret into DIR; without the secret the "
        "copy's entries would all read as tampered. With DATABASE_URL only the secret is "
        "copied: dump the database with pg_dump."
    )

    def add_arguments(self, parser):
        parser.add_argument("directory", metavar="DIR", help="an empty (or new) directory")

    def handle(self, *, directory, **options):
        values = config.merged_environment()
        try:
            written = store.backup(values, Path(directory).expanduser().resolve())
        except config.ConfigError as exc:
            raise CommandError(str(exc)) from None
        for path in written:
            self.stdout.write(f"wrote {path}")
        if values.get("DATABASE_URL", "").strip():
            self.stdout.write('the database itself: pg_dump "$DATABASE_URL" > a file of yours')
