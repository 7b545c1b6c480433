"""The base of every `salon` command: strict flags, one-line refusals."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError


class SalonCommand(BaseCommand):
    # `prune --dry` must not be read as `--dry-run`: no abbreviated flags.
    def create_parser(self, prog_name, subcommand, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        parser = super().create_parser(
            prog_name.replace("manage.py", "salon"), subcommand, **kwargs
        )
        return parser

    def refuse(self, message: str) -> CommandError:
        return CommandError(message)
