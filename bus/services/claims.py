"""File claims: a seat says which paths of a repository it is editing, and an edit of a
claimed file by another session is held back once (the PreToolUse hook) and then let
through, the holder told by a FACT.

A claim names paths relative to the repository's top (bus.rules.claims) in a repository
known by its git common directory (bus.repos), so sessions of one project and the
worktrees of one repository see each other's claims. It ends when released, when its
time runs out (2 h unless said, at most 24 h), or when its seat is gone: which claims
are open is bus.claimsql's SQL, the same statement the hooks' fast path runs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from bus import claimsql, rules, wire
from bus.models import FileClaim, Membership, Seat
from bus.rules import RuleError
from bus.services import entries, rooms
from bus.services.claimed import (
    Open,
    claims_by_seat,
    open_in_repo,
    open_of_seats,
    run_sql,
    shown,
    stored,
)

__all__ = [
    "Open",
    "check_edit",
    "claim",
    "claims_by_seat",
    "follow_focus",
    "of_others",
    "open_in_repo",
    "open_of_seats",
    "release",
    "release_kind",
    "shown",
    "soft_claim",
]


def _repo(repo: object) -> str:
    if not isinstance(repo, str) or not repo.strip():
        raise RuleError(
            "claims are kept per git repository, and this one is in none: run the command "
            "inside the repository (or its worktree) whose files it names"
        )
    if len(repo) > 4096:
        raise RuleError("the repository's path is over 4096 characters")
    return repo


def claim(
    *,
    seat: Seat,
    repo: str,
    paths,
    duration: str | timedelta | None = None,
    note: str | None = None,
    kind: str = FileClaim.KIND_HAND,
) -> dict:
    """Claim paths for `duration` (default 2 h, at most 24 h). A path this seat holds
    already is claimed again (its time and note renewed). The answer names the claims
    of other seats that overlap these."""
    repo = _repo(repo)
    paths = rules.claim_paths(paths)
    if isinstance(duration, str):
        duration = rules.parse_duration(duration)
    duration = rules.claim_duration(duration)
    note = rules.claim_note(note)
    at = timezone.now()
    until = at + duration
    with transaction.atomic():
        for path in paths:
            claimsql.put_claim(
                run_sql,
                seat_id=seat.pk,
                repo=repo,
                path=path,
                kind=kind,
                note=note,
                at=stored(at),
                until=stored(until),
            )
    others = [
        c
        for c in open_in_repo(repo=repo, at=at)
        if c.seat_id != seat.pk and any(rules.claims_overlap(c.path, p) for p in paths)
    ]
    return {
        "seat": seat.name,
        "repo": repo,
        "claimed": paths,
        "until": wire.iso(until),
        "others": [shown(c, at) for c in others],
    }


def release(*, seat: Seat, repo: str | None = None, paths=None) -> dict:
    """Release this seat's claims: the paths named (in `repo`), or all of them."""
    at = timezone.now()
    query = FileClaim.objects.filter(seat=seat, released_at__isnull=True, expires_at__gt=at)
    if paths:
        query = query.filter(repo=_repo(repo), path__in=rules.claim_paths(paths))
    elif repo:
        query = query.filter(repo=repo)
    released = sorted(set(query.values_list("path", flat=True)))
    query.update(released_at=at)
    return {"seat": seat.name, "released": released}


def release_kind(*, seat: Seat, kind: str) -> None:
    FileClaim.objects.filter(seat=seat, kind=kind, released_at__isnull=True).update(
        released_at=timezone.now()
    )


def follow_focus(*, seat: Seat, repo: str, files, focus: dict | None) -> dict | None:
    """`focus --files` claims the files too, in `repo`: they replace what the last focus
    claimed; a focus cleared (None) releases them. Returns the claim's answer, if any."""
    release_kind(seat=seat, kind=FileClaim.KIND_FOCUS)
    if not files or not focus:
        return None
    return claim(seat=seat, repo=repo, paths=files, note=focus["text"], kind=FileClaim.KIND_FOCUS)


def of_others(*, seat: Seat, repo: str, at: datetime | None = None) -> list[dict]:
    """The open claims in `repo` of seats other than this one (SessionStart)."""
    at = at or timezone.now()
    return [shown(c, at) for c in open_in_repo(repo=repo, at=at) if c.seat_id != seat.pk]


# ---------------------------------------------------------------- the edit hooks


def soft_claim(*, seat: Seat, repo: str, path: str) -> bool:
    """A session's own edit of `path`: claimed softly for 30 minutes, unless one of its
    open claims covers it for 25 minutes more. True if anything was written."""
    at = timezone.now()
    path = rules.normalize_claim_path(path)
    mine = [c for c in open_of_seats(seat_ids=[seat.pk], at=at) if c.repo == repo]
    if not claimsql.soft_claim_due(mine, seat.pk, path, at):
        return False
    claim(seat=seat, repo=repo, paths=[path], duration=rules.SOFT_CLAIM, kind=claimsql.SOFT)
    return True


def check_edit(*, seat: Seat, repo: str, path: str) -> dict | None:
    """May this seat edit `path` now? None: no other seat's open claim covers it.
    Otherwise {"verdict": "deny"|"pass", "holders": [shown claims]}: the first edit is
    denied (and recorded); a repeat within REPEAT_WINDOW passes, and on the first pass the
    holders are sent a FACT saying so."""
    at = timezone.now()
    path = rules.normalize_claim_path(path)
    holding = claimsql.holding(open_in_repo(repo=repo, at=at), seat.pk, path)
    if not holding:
        return None
    holders = [shown(c, at) for c in holding]
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with transaction.atomic():
        verdict = claimsql.held_edit(
            run_sql,
            seat_id=seat.pk,
            holder_id=holding[0].seat_id,
            repo=repo,
            path=path,
            at=stored(at),
            since=stored(at - rules.REPEAT_WINDOW),
            lock=lock,
        )
    if verdict == claimsql.DENY:
        return {"verdict": "deny", "path": path, "holders": holders}
    told = _tell_holders(seat, holding, path) if verdict == claimsql.FIRST_PASS else []
    return {"verdict": "pass", "path": path, "holders": holders, "told": told}


def _tell_holders(seat: Seat, holding: list[Open], path: str) -> list[str]:
    """A FACT to each holder: this seat went ahead with the edit of its claimed file, in
    a room both are in (else the holder's first room)."""
    told = []
    mine = set(Membership.objects.current().filter(seat=seat).values_list("room_id", flat=True))
    for seat_id in dict.fromkeys(c.seat_id for c in holding):
        holder = Seat.objects.filter(pk=seat_id).first()
        if holder is None:
            continue
        shared = (
            Membership.objects.current()
            .in_visible_rooms()
            .filter(seat=holder, room_id__in=mine)
            .order_by("pk")
            .select_related("room")
            .first()
        )
        room = shared.room if shared else rooms.primary_room(holder)
        if room is None:
            continue
        claimed = ", ".join(c.path for c in holding if c.seat_id == seat_id)
        text = (
            f"{seat.name} is editing {path} anyway: it was told of your claim ({claimed}) "
            "and repeated its edit to go ahead. Talk to it before you edit that file again."
        )
        try:
            with transaction.atomic():
                entries.send_entry(
                    seat=seat, text=text, room=room, type="FACT", to=[holder.name], via="cli"
                )
        except RuleError:
            continue  # the edit goes ahead all the same
        told.append(holder.name)
    return told
