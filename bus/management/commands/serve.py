"""`salon serve`: apply migrations, then run the ASGI daemon under daphne."""

from __future__ import annotations

from django.conf import settings
from django.core.management import call_command

from bus.management.base import SalonCommand


class Command(SalonCommand):
    help = "Apply migrations and run the agent-salon daemon (daphne) on BIND:PORT."

    def add_arguments(self, parser):
        parser.add_argument("--bind", help=f"address to listen on (default {settings.BIND})")
        parser.add_argument(
            "--port", type=int, help=f"TCP port to listen on (default {settings.PORT})"
        )
        parser.add_argument(
            "--no-migrate", action="store_true", help="start without applying migrations"
        )

    def handle(self, *args, bind=None, port=None, no_migrate=False, **options):
        bind = bind or settings.BIND
        port = port if port is not None else settings.PORT
        if not no_migrate:
            call_command("migrate", interactive=False, verbosity=0)
        self.print_banner(bind, port)
        from daphne.cli import CommandLineInterface

        # Daphne's --http-timeout stays unset on purpose: it would cut open streams.
        CommandLineInterface().run(["-b", bind, "-p", str(port), "salon.asgi:application"])

    def print_banner(self, bind: str, port: int) -> None:
        host = f"[{bind}]" if ":" in bind else bind
        base = f"http://{host}:{port}"
        where = settings.DATABASE_URL.split("@")[-1] if settings.DATABASE_URL else settings.DB_PATH
        self.stdout.write(f"agent-salon listening on {base}  (store: {where})")
        self.stdout.write(f"  MCP endpoint : {base}/mcp?label=<agent>")
        self.stdout.write(f"  webhook      : {base}/notify?label=<sender>")
        self.stdout.write(
            f"  admin        : {base}/admin/  (create a login: salon createsuperuser)"
        )
        self.stdout.write(f"  health       : {base}/healthz")
        if bind not in ("127.0.0.1", "localhost", "::1"):
            from bus.models import Token

            if not Token.objects.exists():
                self.stderr.write(
                    f"WARNING: listening on {bind}, beyond this machine, and no token has "
                    "been issued: anyone who can reach it can write in any name. "
                    "Issue tokens with `salon token issue LABEL` or bind to 127.0.0.1."
                )
        self.stdout.write("Press Ctrl-C to stop.")
        self.stdout.flush()
