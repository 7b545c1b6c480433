"""Group commit: writes that wait on the database thread together share one transaction.

SQLite has one writer at a time, and every write of a process runs on its one database
thread (patches.asgiref). What a write costs beside its own statements is its
transaction (BEGIN IMMEDIATE, the commit and, with synchronous=FULL, its fsync) and the
hop to that thread and back. Writes that arrive while the thread is busy with earlier
ones are taken together: one hop, one transaction, one fsync, each write in a savepoint
of its own, so a refused one rolls back alone. No timer: a write that finds the thread
idle goes at once, alone (a batch of one), as it would without this.

Nothing is acknowledged before it is stored: a write's result is handed back only once
the batch's transaction has committed; when the commit fails, every write of the batch
fails with it and none of them was stored.

`GroupCommit` is the queue (a batch is every submission that arrived while the previous
batch ran); the /notify webhook (relay.views) runs its own batches on it, and `Calls`
runs any function in a batch (the MCP `send` tool, mcpgate.consumers).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

from patches.asgiref import on_database_thread

log = logging.getLogger("salon.bus")

# Submissions stored in one transaction at most: bounds how long one batch holds the
# write lock, and what a failed commit takes down with it.
BATCH_LIMIT = 200


class GroupCommit:
    """Submissions waiting on the database thread, run there as one batch
    (`run_batch`, one answer per submission, in order) once the previous batch is done."""

    limit = BATCH_LIMIT

    def __init__(self) -> None:
        self._pending: list[tuple[Any, asyncio.Future]] = []
        self._task: asyncio.Task | None = None

    async def submit(self, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((item, future))
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = loop.create_task(self._run())
        return await future

    async def _run(self) -> None:
        while self._pending:
            batch = self._pending[: self.limit]
            del self._pending[: self.limit]
            items = [item for item, _ in batch]
            try:
                answers = await on_database_thread(self.run_batch, items)
            except Exception as exc:  # run_batch answers for each; a safety net all the same
                log.exception("a batch of %d writes failed", len(batch))
                answers = [self.failed(exc) for _ in batch]
            for (_, future), answered in zip(batch, answers, strict=True):
                if not future.done():
                    future.set_result(answered)

    def run_batch(self, items: list) -> list:
        """On the database thread: the answer of each item, once stored."""
        raise NotImplementedError

    def failed(self, exc: Exception) -> Any:
        """The answer of every item of a batch that could not be run at all."""
        raise NotImplementedError


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Calls(GroupCommit):
    """Functions run on the database thread, those that wait together in one transaction:
    `await calls.run(func, *args)` returns what func returned, or raises what it raised,
    once its transaction has committed."""

    async def run(self, func: Callable, *args) -> Any:
        answered = await self.submit((func, args))
        if isinstance(answered, _Failed):
            raise answered.error
        return answered

    def failed(self, exc: Exception) -> _Failed:
        return _Failed(exc)

    def run_batch(self, items: list[tuple[Callable, tuple]]) -> list:
        if len(items) == 1:  # alone: in its own transactions, as without a batch
            func, args = items[0]
            try:
                return [func(*args)]
            except Exception as exc:
                return [_Failed(exc)]
        committed: list[bool] = []
        answers: list = []
        try:
            with transaction.atomic():
                # First of the after-commit callbacks: it runs once the commit has
                # succeeded, before the calls' own (their pushes and doorbells).
                transaction.on_commit(lambda: committed.append(True))
                for func, args in items:
                    try:
                        with transaction.atomic():  # a savepoint: a failure rolls back alone
                            answers.append(func(*args))
                    except Exception as exc:
                        answers.append(_Failed(exc))
        except Exception as exc:
            if committed:  # stored; a callback after the commit failed: the answers stand
                log.exception("an after-commit callback of a batch of writes failed")
                return answers
            log.exception("the commit of a batch of %d writes failed", len(items))
            return [_Failed(exc) for _ in items]  # none of them was stored
        return answers
