"""`salon agents [--json]`: every agent and its seats (SPEC §7)."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = (
        "Show every agent with its seats: liveness, last wrote, quiet, focus. "
        "--json prints the salon.agents/1 contract."
    )

    def add_arguments(self, parser):
        cli.add_json_flag(parser)

    def handle(self, *, json, **options):
        from bus import services

        projection = services.agents_projection()
        if json:
            self.emit_json(projection)
        else:
            self.say(cli.format_agents(projection))
