"""The letterbox and the safety net (bus.services.triage) on the daemon's event loop: before a push
claim or an MCP `wait` looks at the ledger, the rows its seats have to be judged are
claimed in the database thread, judged in a worker thread (never in the database thread
every stream shares, and never inside a transaction), and recorded. What the letterbox
holds back is then not told; what the net lets through is."""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async
from django.conf import settings

from bus import judge, services
from bus.models import Seat


def claim_judgements(seat_ids: list[int], asked: bool = False) -> list[dict]:
    """The letterbox and the safety net's rows to judge for these seats (services.triage)."""
    work = []
    for seat in Seat.objects.filter(pk__in=seat_ids).order_by("pk"):
        work += services.triage.claim(seat=seat, asked=asked)
    return work


async def judge_first(seat_ids: list[int], *, asked: bool = False) -> None:
    """Judge what these seats are about to be told, if a judge is configured; `asked`:
    by the wait tool, which tells a quiet seat too."""
    if not any(services.triage.halves()):
        return
    work = await database_sync_to_async(claim_judgements)(seat_ids, asked)
    while work:  # at most twice: the net's second look at a letterbox "no" is final
        answers = await asyncio.to_thread(
            judge.ask_all,
            settings.TRIAGE_CMD,
            [item["document"] for item in work],
            settings.TRIAGE_TIMEOUT,
        )
        work = await database_sync_to_async(services.triage.record)(
            answers={item["row"]: answer for item, answer in zip(work, answers, strict=True)}
        )
