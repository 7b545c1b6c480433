"""Cross-project requests, settled: a request the receiving project's policy serves,
gates or denies (bus.services.requests stored it with its verdict, its woken ledger rows
held back) is answered here, by the first process of the receiving store that sees it.

* serve: the request is claimed (a conditional UPDATE, outside any transaction), the
  project's command runs (the runner an adapter registered: relay.runner), and its
  output becomes an ANSWER `re:` the request, written by the receiving agent, via
  "policy", meta served_by = policy. Nobody in the receiving project is woken. A command
  that fails, times out or prints nothing releases nothing: the request falls to wake
  (its held rows wake, once), the reason saying why.
* deny: the asker gets the denial's reason as an ANSWER; nobody is woken.
* gate: the triage judge (AGENT_SALON_TRIAGE_CMD) is asked whether a person should see
  it: yes → wake; no → the asker is told it was declined; no judge or no clear answer →
  wake (attention fails open).

Once only: whoever claims runs it; nobody else ever starts it again. A claim whose
process died (its serve never finished) falls to wake at the next sweep once the timeout
is well past; a request nobody claimed (its sender died between the commit and the claim)
is claimed by the sweep. A daemon sweeps every few seconds (relay's AppConfig registers
it).

Where it runs: on bus.signals.request_decided, after the storing transaction commits —
in that very process (a `salon ask` with no server answers it itself), or on the
dispatcher a daemon registered (a worker thread, so neither its database thread nor its
local line waits for a project's command).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from bus import bell, judge, policy, signals, wire
from bus.models import Entry, Request, WakeDecision
from bus.rules import RuleError
from bus.services import entries, requests, seats

log = logging.getLogger("salon.requests")

# A claim older than the work's timeout plus this lost its process: it falls to wake.
STALE_GRACE = timedelta(seconds=5)
# A request nobody claimed this long after it was stored is claimed by the sweep.
UNCLAIMED_GRACE = timedelta(seconds=2)
SWEEP_LIMIT = 50
GATE_QUESTION = (
    "Another project sent this coding-agent project the request below, and this project's "
    "policy says to ask first. Should it wake a person in this project? Answer with one "
    "word: yes or no."
)

Runner = Callable[..., object]
_runner: Runner | None = None
_dispatch: Callable[[Callable[[], None]], None] | None = None


def set_runner(runner: Runner | None) -> None:
    """The adapter that runs a serve command (relay.runner.serve's signature)."""
    global _runner
    _runner = runner


def set_dispatch(dispatch: Callable[[Callable[[], None]], None] | None) -> None:
    """Where a daemon settles requests (a worker thread); None: in the storing thread."""
    global _dispatch
    _dispatch = dispatch


def _on_decided(sender, entry_id, **kwargs) -> None:
    if _dispatch is not None:
        _dispatch(lambda: settle_quietly(entry_id))
    else:
        settle(entry_id)


signals.request_decided.connect(_on_decided, dispatch_uid="bus.services.serving")


def me() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def settle_quietly(entry_id) -> None:
    """settle() on a worker thread: an error is logged, and the connection let go."""
    try:
        settle(entry_id)
    except Exception:
        log.exception("settling request %s failed", entry_id)
    finally:
        connection.close()


def settle(entry_id) -> str | None:
    """Claim the request and do what its verdict says; the outcome, or None when it was
    not this process's to do (settled already, or claimed by another)."""
    if connection.in_atomic_block:
        raise RuntimeError("a request is settled outside any transaction")
    row = Request.objects.open().filter(pk=entry_id).first()
    if row is None or not _claim(row):
        return None
    return _settle_claimed(row)


def _claim(row: Request) -> bool:
    now = timezone.now()
    won = (
        Request.objects.open()
        .filter(pk=row.pk, claimed_at__isnull=True)
        .update(claimed_at=now, claimed_by=me())
    )
    row.claimed_at, row.claimed_by = now, me()
    return won == 1


def _settle_claimed(row: Request) -> str:
    if row.verdict == policy.SERVE:
        return _serve(row)
    if row.verdict == policy.DENY:
        return _answer(row, Request.DENIED, f"denied: {row.reason}")
    return _gate(row)


def _serve(row: Request) -> str:
    if _runner is None:
        return fall_to_wake(row, "nothing here can run a serve command")
    served = _runner(
        list(row.argv or []),
        root=row.root,
        key=row.ask,
        asker=row.writer,
        timeout=settings.SERVE_TIMEOUT,
    )
    if not served.ok:
        return fall_to_wake(row, f"the serve failed ({served.reason})")
    return _answer(row, Request.SERVED, served.output, seconds=served.seconds)


def _gate(row: Request) -> str:
    if not settings.TRIAGE_CMD:
        return fall_to_wake(row, "no triage judge is set (AGENT_SALON_TRIAGE_CMD)")
    entry = Entry.objects.select_related("room").get(pk=row.pk)
    answer = judge.ask(settings.TRIAGE_CMD, gate_document(entry, row), settings.TRIAGE_TIMEOUT)
    if answer == judge.YES:
        return fall_to_wake(row, "the judge said a person should see it")
    if answer == judge.NO:
        return _answer(row, Request.DECLINED, f"declined: {row.reason}; the judge said no")
    return fall_to_wake(row, "the judge gave no clear answer")


def gate_document(entry: Entry, row: Request) -> dict:
    return {
        "schema": "salon.gate/1",
        "half": "gate",
        "question": GATE_QUESTION,
        "request": {
            "id": str(entry.id),
            "room": entry.room.name,
            "ts": wire.iso(entry.ts),
            "from": entry.sender,
            "to": row.agent,
            "ask": row.ask,
            "content": entry.content,
        },
        "policy": {"verdict": row.verdict, "reason": row.reason},
    }


def _answer(row: Request, outcome: str, text: str, *, seconds: float | None = None) -> str:
    """Settle the request as `outcome` and write its ANSWER, by the receiving agent."""
    now = timezone.now()
    settled = (
        Request.objects.open()
        .filter(pk=row.pk, claimed_by=row.claimed_by)
        .update(outcome=outcome, done_at=now, seconds=seconds)
    )
    if not settled:
        return Request.WOKEN  # the sweep took it for dead: it woke a person instead
    try:
        seat = seats.check_in(agent=row.agent, touch=False)
        report = entries.send_entry(
            seat=seat,
            text=text,
            room=row.room,
            type="ANSWER",
            re=str(row.pk),
            meta={"served_by": "policy", "outcome": outcome, "asked": row.ask},
            via="policy",
        )
    except RuleError as exc:
        Request.objects.filter(pk=row.pk).update(outcome="")
        return fall_to_wake(row, f"the answer could not be written ({exc})")
    Request.objects.filter(pk=row.pk).update(answer=report["id"])
    return outcome


def fall_to_wake(row: Request, reason: str, *, stale_before: datetime | None = None) -> str:
    """The request wakes its held readers after all, once: what the rule decided for them
    when it was stored. `stale_before`: only if its claim is older than that."""
    with transaction.atomic():
        rows = Request.objects.open().filter(pk=row.pk)
        if stale_before is not None:
            rows = rows.filter(claimed_at__lt=stale_before)
        if not rows.update(outcome=Request.WOKEN, reason=reason[:2000], done_at=timezone.now()):
            return ""
        held = WakeDecision.objects.filter(entry_id=row.pk, reason=requests.HELD)
        seat_ids = [pk for pk in held.values_list("seat_id", flat=True) if pk is not None]
        held.update(woken=True, reason=requests.HELD_WAKES_AS)
        bell.ring_on_commit(entry_id=row.pk, seat_ids=seat_ids)
    return Request.WOKEN


def sweep(now: datetime | None = None) -> dict:
    """One look at the open requests: claims that outlived their process fall to wake,
    requests nobody claimed are settled now. Returns {"woken": n, "settled": n}."""
    now = now or timezone.now()
    work = max(settings.SERVE_TIMEOUT, settings.TRIAGE_TIMEOUT)
    stale_before = now - timedelta(seconds=work) - STALE_GRACE
    done = {"woken": 0, "settled": 0}
    for row in Request.objects.open().filter(claimed_at__lt=stale_before)[:SWEEP_LIMIT]:
        why = "the process serving it stopped before it answered"
        if fall_to_wake(row, why, stale_before=stale_before):
            done["woken"] += 1
    unclaimed = Request.objects.open().filter(
        claimed_at__isnull=True, decided_at__lt=now - UNCLAIMED_GRACE
    )
    for row in unclaimed[:SWEEP_LIMIT]:
        if settle(row.pk):
            done["settled"] += 1
    return done


def wait_answer(entry_id, seconds: float) -> dict:
    """Wait up to `seconds` for the ANSWER to a request (served, denied, declined — or
    written by a person), or for a local request to fall to wake: what outcome_of says
    then, and for a request decided on another machine the first ANSWER that landed."""
    deadline = time.monotonic() + max(0.0, seconds)
    pause = 0.002
    entry = Entry.objects.filter(pk=entry_id).values("room_id", "seq").first()
    if entry is None:
        return {}
    while True:
        shown = requests.outcome_of(entry_id)
        if shown.get("answer") or shown.get("outcome") == Request.WOKEN:
            return shown
        if not shown:
            landed = (
                Entry.objects.filter(
                    room_id=entry["room_id"], seq__gt=entry["seq"], re=entry_id, type="ANSWER"
                )
                .order_by("seq")
                .values_list("id", flat=True)
                .first()
            )
            if landed is not None:
                return {"outcome": "", "answer": requests.answer_shape(landed, entry_id)}
        left = deadline - time.monotonic()
        if left <= 0:
            return shown or {"answer": None}
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)
