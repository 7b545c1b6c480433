"""`salon serve`: apply migrations, then run the ASGI daemon under daphne."""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from bus.management.base import SalonCommand
from salon import config, serving, store
from salond import companions


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
        parser.add_argument(
            "--workers",
            type=int,
            default=1,
            help="daphne processes sharing the one listening socket (more than 1 needs "
            "REDIS_URL, and DATABASE_URL for PostgreSQL is recommended)",
        )
        # `salon relay serve`: the relay's API and /healthz only, no daemon.
        parser.add_argument("--relay-only", action="store_true", help=argparse.SUPPRESS)

    def handle(self, *args, bind=None, port=None, no_migrate=False, workers=1, **options):
        bind = bind or settings.BIND
        port = port if port is not None else settings.PORT
        self.relay = bool(options.get("relay_only"))
        if workers < 1:
            raise CommandError("--workers must be 1 or more")
        # A relay's workers share nothing but the database (a long poll looks at it).
        if workers > 1 and not settings.REDIS_URL and not self.relay:
            raise CommandError(
                "several workers hand streams over to each other through Redis: set "
                "REDIS_URL (e.g. redis://127.0.0.1:6379/0), or run one worker"
            )
        serving.allow_bound_host(bind)
        if not no_migrate:
            # Under the lock of a store's first use: two servers (or a server and a hook)
            # starting on a new store at once would both create its tables.
            where = store.locate(config.merged_environment())
            with store.migration_lock(where.db_path):
                call_command("migrate", interactive=False, verbosity=0)
        if workers == 1:
            if serving.port_free(bind, port) and not self.relay:
                companions.server_starting()
            banner = lambda: self.print_banner(bind, port)  # noqa: E731
            endpoint = serving.tcp_endpoint(bind, port)
            if not serving.run(endpoint, on_listening=banner, relay=self.relay):
                raise CommandError(serving.bind_failure(bind, port))
        else:
            self.supervise(bind, port, workers)

    def supervise(self, bind: str, port: int, workers: int) -> None:
        """N daphne processes accept on one shared socket (the kernel spreads the
        connections); no sticky sessions are needed, since sessions live in the database
        and hand-offs go through Redis. A worker that dies is started again."""
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((bind, port))
        except OSError:
            listener.close()
            raise CommandError(serving.bind_failure(bind, port)) from None
        listener.listen(1024)
        if not self.relay:
            companions.server_starting()
        listener.set_inheritable(True)
        fd = listener.fileno()
        command = [sys.executable, "-m", "salon.serving", "--fd", str(fd)]
        if self.relay:
            command.append("--relay")
        stopping = False

        def start() -> subprocess.Popen:
            return subprocess.Popen(command, pass_fds=(fd,))

        def stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        children = [start() for _ in range(workers)]
        self.print_banner(bind, port)
        self.stdout.write(
            f"  workers      : {workers} (pids {', '.join(str(c.pid) for c in children)})"
        )
        self.stdout.flush()
        while not stopping:
            time.sleep(0.5)
            for index, child in enumerate(children):
                if child.poll() is not None and not stopping:
                    self.stderr.write(
                        f"worker {child.pid} exited ({child.returncode}); starting another"
                    )
                    children[index] = start()
        for child in children:
            # SIGTERM, not SIGINT: a serving worker stops on either as cleanly, and one
            # still starting ends quietly instead of with a KeyboardInterrupt traceback.
            child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(15)
            except subprocess.TimeoutExpired:
                child.kill()
        listener.close()

    def print_banner(self, bind: str, port: int) -> None:
        host = f"[{bind}]" if ":" in bind else bind
        base = f"http://{host}:{port}"
        found = store.describe(config.merged_environment())
        if getattr(self, "relay", False):
            self.stdout.write(f"agent-salon relay listening on {base}")
            for line in store.describe_lines(found)[:3]:
                self.stdout.write(f"  {line}")
            self.stdout.write(f"  relay API    : {base}/relay/v1/")
            self.stdout.write(f"  health       : {base}/healthz")
            self.stdout.write("  nothing else is served on this address")
            self.stdout.write("Press Ctrl-C to stop.")
            self.stdout.flush()
            return
        self.stdout.write(f"agent-salon listening on {base}")
        for line in store.describe_lines(found)[:3]:  # its own line is not up: no servers
            self.stdout.write(f"  {line}")
        self.stdout.write(f"  MCP endpoint : {base}/mcp?label=<agent>")
        self.stdout.write(f"  webhook      : {base}/notify?label=<sender>")
        self.stdout.write(
            f"  admin        : {base}/admin/  (create a login: salon createsuperuser)"
        )
        self.stdout.write(f"  health       : {base}/healthz")
        warning = serving.open_bind_warning(bind)
        if warning:
            self.stderr.write(warning)
        self.stdout.write("Press Ctrl-C to stop.")
        self.stdout.flush()
