"""asgiref: the one database thread of the Channels consumers, reached from inside a
request, and the test for sync code waiting above a coroutine.

Django's ASGI handler would run a sync view in a new thread per request, and a new
thread is a new database connection: on SQLite those threads fought the consumers'
thread for the write lock (POST -> event p99 of 4-11 s under 8 concurrent posters), on
PostgreSQL each /notify opened a connection and a busy run met "too many clients"
(bench/RESULTS.md "3. Throughput"). On the consumers' thread, under 8 concurrent posters
on 2 busy cores, POST -> event p99 fell from 12-16 s to 1.4-1.8 s and pushes kept up
with sends (the rate fell from 22-27 to 17-20 entries/s: the one thread no longer
overlaps /notify's ORM work with the pushes').

Both reach into asgiref's class attributes: SyncToAsync.single_thread_executor (the
thread) and AsyncToSync.executors (a thread-local holding the executor of the sync code
waiting above, if any).
"""

from __future__ import annotations

from asgiref.sync import AsyncToSync, SyncToAsync, sync_to_async
from channels.db import database_sync_to_async

WRITTEN_FOR = {"asgiref": ("3.9", "3.14")}


def sync_caller_waiting() -> bool:
    """Whether sync code waits above this coroutine (Django's test client, WSGI)."""
    return getattr(AsyncToSync.executors, "current", None) is not None


async def on_database_thread(func, *args):
    """Run func(*args) on the database thread the Channels consumers use.

    That thread is asgiref's SyncToAsync.single_thread_executor: database_sync_to_async
    picks it outside any request. Inside a request Django's ASGI handler has entered a
    ThreadSensitiveContext of its own, which would pick a fresh thread (and connection)
    per request, so the executor is named here instead. When sync code is waiting above
    us (Django's test client, WSGI), the work goes back to that thread and its open
    transaction, as sync_to_async does; the connection is then the caller's to manage.
    """
    if sync_caller_waiting():
        return await sync_to_async(func)(*args)
    on_thread = database_sync_to_async(
        func, thread_sensitive=False, executor=SyncToAsync.single_thread_executor
    )
    return await on_thread(*args)
