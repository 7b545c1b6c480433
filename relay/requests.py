"""A daemon's part in cross-project requests (bus.services.serving): it settles the
requests its own writes and landings store on a worker thread of its own — so neither its
database thread nor its local line waits for a project's command or the triage judge —
and sweeps every few seconds for requests nobody claimed and claims whose process died.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor

from django.db import connection

from bus.services import serving

log = logging.getLogger("salon.requests")

SWEEP_SECONDS = 2.0
# Serves at once: a project's commands are lookups; more would only share two cores.
WORKERS = 2


class Requests:
    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="salon-serve")
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        serving.set_dispatch(self.pool.submit)
        self.task = asyncio.get_running_loop().create_task(self._sweep_loop())

    async def _sweep_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await loop.run_in_executor(self.pool, _sweep_once)
            except Exception:
                log.exception("sweeping the open requests failed")

    async def stop(self) -> None:
        serving.set_dispatch(None)
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        self.pool.shutdown(wait=False, cancel_futures=True)


def _sweep_once() -> None:
    try:
        serving.sweep()
    finally:
        connection.close()


async def companion(host) -> Requests:
    requests = Requests()
    requests.start()
    return requests
