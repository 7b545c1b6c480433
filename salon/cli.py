"""The `salon` console script: `salon <command>` runs `manage.py <command>`."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")
    from django.core.exceptions import ImproperlyConfigured

    try:
        import django

        django.setup()
    except ImproperlyConfigured as exc:
        # A malformed setting is the user's to fix: one line, no traceback.
        print(f"agent-salon: configuration error: {exc}", file=sys.stderr)
        return 2
    from django.core.management import execute_from_command_line

    execute_from_command_line(["salon", *argv])
    return 0


if __name__ == "__main__":
    sys.exit(main())
