"""salon.settings, plus a log of every SQL statement SQLite runs, with its thread.

For counting and listing the statements of one send (bench/side_by_side.py --sql): each
SQLite connection the process opens gets a trace callback (sqlite3's
`set_trace_callback`, so BEGIN, COMMIT, SAVEPOINT and the PRAGMAs of a new connection
are listed too, as SQLite ran them), written to the file named by SALON_BENCH_SQL_LOG as
`<monotonic ms> <thread name> <statement>`. Used as DJANGO_SETTINGS_MODULE by a daemon
started for that purpose only: the tracing costs CPU.
"""

import os
import threading
import time

from django.db.backends.signals import connection_created

from salon.settings import *  # noqa: F403

_path = os.environ.get("SALON_BENCH_SQL_LOG", "")
_lock = threading.Lock()


def _trace(sql: str) -> None:
    line = f"{time.monotonic() * 1000:.3f} {threading.current_thread().name} {sql}\n"
    with _lock, open(_path, "a") as log:
        log.write(line.replace("\n", " ").rstrip() + "\n")


def _trace_connection(sender, connection, **kwargs) -> None:
    if _path and connection.vendor == "sqlite":
        connection.connection.set_trace_callback(_trace)


connection_created.connect(_trace_connection)
