"""`salon prune [--days N] [--dry-run]`: forget seats gone and silent for N days."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = (
        "Forget seats that are gone and silent for N days (default 7), and delete the stats "
        "ledger's rows older than AGENT_SALON_STATS_DAYS (default 30). Entries are never "
        "touched. --dry-run lists them and writes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--days",
            type=cli.days_arg,
            default=7,
            metavar="N",
            help="silent for at least N days (default 7)",
        )
        parser.add_argument("--dry-run", action="store_true", help="list, write nothing")
        cli.add_json_flag(parser)

    def handle(self, *, days, dry_run, json, **options):
        from bus import services

        result = services.prune(days=days, dry_run=dry_run)
        if json:
            self.emit_json(result)
            return
        if not result["seats"]:
            self.say(f"no seat is gone and silent for {days} days")
        else:
            verb = "would forget" if dry_run else "forgot"
            self.say(
                f"{verb} {cli.plural(len(result['seats']), 'seat')}: {', '.join(result['seats'])}"
            )
        ledger = result["ledger"]
        rows = ledger["decisions"] + ledger["decisionCounts"] + ledger["readCounts"]
        if rows:
            verb = "would delete" if dry_run else "deleted"
            self.say(
                f"{verb} {cli.plural(rows, 'stats ledger row')} older than "
                f"{ledger['retentionDays']} days (AGENT_SALON_STATS_DAYS)"
            )
