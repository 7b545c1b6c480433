"""File claims as sessions meet them: `salon claim` / `release` / `focus --files`, the
PreToolUse hook that holds an edit of a claimed file back once, the PostToolUse soft claim
of an edited file, and where claims show. Real `salon` processes on a real store, real git
repositories and worktrees; the hook JSON is what Claude Code sends."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bus import repos, rules
from tests.claude_kit import (
    WEB_SEAT,
    WEB_SEAT_2,
    WEB_SESSION,
    WEB_SESSION_2,
    execute,
    hook,
    hook_json,
    ok,
    ok_json,
    query,
    salon,
)

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]


@pytest.fixture
def env(env, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return dict(env, TMPDIR=str(tmp), AGENT_SALON_ROOM="team")


@pytest.fixture
def repo(tmp_path) -> Path:
    """A git repository `web-app` with src/cart.py and src/api/orders.py committed."""
    top = tmp_path / "web-app"
    (top / "src" / "api").mkdir(parents=True)
    (top / "src" / "cart.py").write_text("TOTAL = 1\n")
    (top / "src" / "api" / "orders.py").write_text("ORDERS = []\n")
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    subprocess.run([*GIT, "-C", str(top), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(top), "commit", "-qm", "start"], check=True)
    return top


def first(env, *args, cwd):
    return salon(env, *args, agent="web-app", session=WEB_SESSION, cwd=cwd)


def second(env, *args, cwd):
    return salon(env, *args, agent="web-app", session=WEB_SESSION_2, cwd=cwd)


def edit(env, session, cwd: Path, path: Path, tool="Edit"):
    """The PreToolUse hook of one edit; its JSON output or None."""
    key = "notebook_path" if tool == "NotebookEdit" else "file_path"
    return hook_json(
        hook(
            env,
            "pre-edit",
            session,
            cwd,
            tool_name=tool,
            tool_input={key: str(path), "old_string": "1", "new_string": "2"},
        )
    )


def edited(env, session, cwd: Path, path: Path, tool="Write"):
    """The PostToolUse hook after a successful edit."""
    return hook_json(
        hook(
            env,
            "heartbeat",
            session,
            cwd,
            tool_name=tool,
            tool_input={"file_path": str(path), "content": "x"},
            tool_response={"type": "update", "filePath": str(path)},
        )
    )


def both_in_team(env, repo):
    ok(salon(env, "rooms", "--create", "team"))
    ok(first(env, "join", "team", cwd=repo))
    ok(second(env, "join", "team", cwd=repo))


def reason(output) -> str:
    specific = output["hookSpecificOutput"]
    assert specific["hookEventName"] == "PreToolUse"
    assert specific["permissionDecision"] == "deny"
    return specific["permissionDecisionReason"]


def says_who_holds_cart(said: str) -> None:
    """The reason a held-back edit of src/cart.py gives: the holder, its focus, the note,
    the claim's age, and the two ways on (ask the holder, or repeat the edit)."""
    for part in (
        "src/cart.py",
        WEB_SEAT,
        '"splitting the cart totals"',
        '"halfway through totals"',
        "claimed just now",
        f"--to '{WEB_SEAT}'",
        " send team QUESTION ",
        "repeat this same edit",
    ):
        assert part in said, (part, said)


def claims_of(env, seat):
    return query(
        env,
        "SELECT c.path, c.kind, c.note FROM bus_fileclaim c JOIN bus_seat s ON s.id = c.seat_id "
        "WHERE s.name = ? AND c.released_at IS NULL ORDER BY c.path",
        seat,
    )


def facts_to(env, seat):
    return [
        content
        for (content,) in query(
            env,
            "SELECT e.content FROM bus_wakedecision w JOIN bus_seat s ON s.id = w.seat_id "
            "JOIN bus_entry e ON e.id = w.entry_id WHERE s.name = ? AND e.type = 'FACT' "
            "AND w.woken ORDER BY e.seq",
            seat,
        )
    ]


# ---------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("claimed", "path", "covers"),
    [
        ("src/cart.py", "src/cart.py", True),
        ("src/cart.py", "src/cart.pyc", False),
        ("src", "src/a/b.py", True),
        ("src", "srcx/a.py", False),
        ("src/api/**", "src/api/v1/orders.py", True),
        ("src/api/**", "src/apix/orders.py", False),
        ("src/**/*.py", "src/cart.py", True),
        ("src/**/*.py", "src/a/b/c.py", True),
        ("*.md", "README.md", True),
        ("*.md", "docs/a.md", False),
        ("src/?.py", "src/a.py", True),
        ("src/?.py", "src/ab.py", False),
    ],
)
def test_what_a_claim_covers(claimed, path, covers):
    assert rules.claim_covers(claimed, path) is covers


def test_the_hooks_fast_path_and_the_rules_share_one_matcher_and_one_gone_window():
    from bus import claimpaths

    assert rules.claim_covers is claimpaths.claim_covers
    assert claimpaths.GONE_AFTER == rules.UNKNOWN_WINDOW


@pytest.mark.parametrize(
    ("typed", "stored"), [("./src//cart.py/", "src/cart.py"), ("src\\api\\x.py", "src/api/x.py")]
)
def test_a_claimed_path_is_stored_in_one_spelling(typed, stored):
    assert rules.normalize_claim_path(typed) == stored


# ---------------------------------------------------------------- the repository


def test_a_repository_and_its_worktree_are_known_by_one_common_directory(repo, tmp_path):
    tree = tmp_path / "web-app-feature"
    subprocess.run([*GIT, "-C", str(repo), "worktree", "add", "-q", str(tree)], check=True)
    here = repos.locate("src/cart.py", str(repo))
    there = repos.locate(str(tree / "src" / "cart.py"))
    assert here.common == there.common == str((repo / ".git").resolve())
    assert (here.relative, there.relative) == ("src/cart.py", "src/cart.py")
    assert repos.locate("src/new/file.py", str(tree)).relative == "src/new/file.py"
    assert repos.locate("x", str(tmp_path)) is None


# ---------------------------------------------------------------- the hook


def test_an_edit_of_a_claimed_file_is_denied_once_naming_holder_focus_note_and_age(env, repo):
    both_in_team(env, repo)
    ok(first(env, "focus", "splitting the cart totals", cwd=repo))
    ok(first(env, "claim", "src/cart.py", "--note", "halfway through totals", cwd=repo))
    says_who_holds_cart(reason(edit(env, WEB_SESSION_2, repo, repo / "src" / "cart.py")))
    # The repeat goes ahead, and the holder is told by a FACT addressed to it.
    assert edit(env, WEB_SESSION_2, repo, repo / "src" / "cart.py") is None
    (fact,) = facts_to(env, WEB_SEAT)
    assert WEB_SEAT_2 in fact and "src/cart.py" in fact
    # Further edits within the window pass without telling the holder again.
    assert edit(env, WEB_SESSION_2, repo, repo / "src" / "cart.py") is None
    assert len(facts_to(env, WEB_SEAT)) == 1


def test_an_edit_with_no_claim_on_its_file_prints_nothing(env, repo):
    both_in_team(env, repo)
    ok(first(env, "claim", "src/cart.py", cwd=repo))
    done = hook(
        env,
        "pre-edit",
        WEB_SESSION_2,
        repo,
        tool_name="Edit",
        tool_input={"file_path": str(repo / "src" / "api" / "orders.py")},
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    # The holder's own edit of its file is never held back.
    assert edit(env, WEB_SESSION, repo, repo / "src" / "cart.py") is None
    assert query(env, "SELECT COUNT(*) FROM bus_claimdenial") == [(0,)]


def test_a_glob_claim_covers_every_file_under_it(env, repo):
    both_in_team(env, repo)
    ok(first(env, "claim", "src/api/**", cwd=repo))
    reason(edit(env, WEB_SESSION_2, repo, repo / "src" / "api" / "orders.py"))
    reason(edit(env, WEB_SESSION_2, repo, repo / "src" / "api" / "new" / "f.py", tool="Write"))
    assert edit(env, WEB_SESSION_2, repo, repo / "src" / "cart.py") is None


def test_a_claim_made_in_a_worktree_holds_in_the_main_checkout(env, repo, tmp_path):
    tree = tmp_path / "feature"
    subprocess.run([*GIT, "-C", str(repo), "worktree", "add", "-q", str(tree)], check=True)
    both_in_team(env, repo)
    ok(first(env, "claim", "src/cart.py", cwd=tree))
    reason(edit(env, WEB_SESSION_2, repo, repo / "src" / "cart.py"))


def test_a_notebook_edit_is_checked_like_any_edit(env, repo):
    both_in_team(env, repo)
    ok(first(env, "claim", "*.ipynb", cwd=repo))
    reason(edit(env, WEB_SESSION_2, repo, repo / "a.ipynb", tool="NotebookEdit"))


def test_a_released_expired_or_gone_claim_holds_nothing_back(env, repo):
    both_in_team(env, repo)
    cart = repo / "src" / "cart.py"
    ok(first(env, "claim", "src/cart.py", cwd=repo))
    ok(first(env, "release", "src/cart.py", cwd=repo))
    assert edit(env, WEB_SESSION_2, repo, cart) is None
    ok(first(env, "claim", "src/cart.py", "--for", "5m", cwd=repo))
    past = datetime.now(UTC) - timedelta(minutes=1)
    stamp = past if env.get("DATABASE_URL") else past.replace(tzinfo=None).isoformat(" ")
    execute(env, "UPDATE bus_fileclaim SET expires_at = ?", stamp)
    assert edit(env, WEB_SESSION_2, repo, cart) is None
    ok(first(env, "claim", "src/cart.py", cwd=repo))
    reason(edit(env, WEB_SESSION_2, repo, repo / "src" / "cart.py"))
    hook_json(hook(env, "session-end", WEB_SESSION, repo))  # the holder's session is over
    assert edit(env, WEB_SESSION_2, repo, cart) is None


def test_an_own_edit_claims_its_file_softly_and_holds_back_the_next_session(env, repo):
    both_in_team(env, repo)
    cart = repo / "src" / "cart.py"
    assert edited(env, WEB_SESSION, repo, cart) is None
    assert claims_of(env, WEB_SEAT) == [("src/cart.py", "soft", "")]
    said = reason(edit(env, WEB_SESSION_2, repo, cart))
    assert WEB_SEAT in said and "a claim made by editing" in said
    # Another edit soon after writes nothing more.
    before = query(env, "SELECT COUNT(*), MAX(expires_at) FROM bus_fileclaim")
    assert edited(env, WEB_SESSION, repo, cart) is None
    assert query(env, "SELECT COUNT(*), MAX(expires_at) FROM bus_fileclaim") == before


def test_autoclaim_off_claims_nothing(env, repo):
    both_in_team(env, repo)
    off = dict(env, AGENT_SALON_AUTOCLAIM="0")
    assert edited(off, WEB_SESSION, repo, repo / "src" / "cart.py") is None
    assert claims_of(env, WEB_SEAT) == []


def test_an_edit_outside_any_repository_prints_nothing(env, tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir()
    assert edit(env, WEB_SESSION, loose, loose / "notes.txt") is None
    assert edited(env, WEB_SESSION, loose, loose / "notes.txt") is None
    assert query(env, "SELECT COUNT(*) FROM bus_fileclaim") == [(0,)]


@pytest.mark.parametrize(
    "payload",
    [
        "not json",
        json.dumps({"session_id": WEB_SESSION, "tool_name": "Edit", "tool_input": "x"}),
        json.dumps(
            {"session_id": WEB_SESSION, "tool_name": "Edit", "tool_input": {"file_path": 7}}
        ),
        json.dumps(
            {
                "session_id": WEB_SESSION,
                "tool_name": "Edit",
                "tool_input": {"file_path": "a\u0000b"},
            }
        ),
    ],
)
def test_a_hook_input_it_cannot_use_never_fails_the_edit(env, repo, payload):
    from tests.support import run_salon

    done = run_salon("hook", "pre-edit", env=env, cwd=repo, stdin=payload)
    assert (done.returncode, done.stdout) == (0, "")


def test_a_store_that_cannot_be_opened_never_fails_the_edit(env, repo, tmp_path):
    broken = {k: v for k, v in env.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    broken["AGENT_SALON_DB"] = str(tmp_path / "nowhere" / "salon.db")
    done = hook(
        broken, "pre-edit", WEB_SESSION, repo,
        tool_name="Edit", tool_input={"file_path": str(repo / "src" / "cart.py")},
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "")


# ---------------------------------------------------------------- the commands


def test_claim_names_the_overlapping_claims_of_others_and_release_ends_them(env, repo):
    both_in_team(env, repo)
    ok(first(env, "claim", "src/api", "--note", "new endpoints", cwd=repo))
    answer = ok_json(second(env, "claim", "src/api/orders.py", "--json", cwd=repo))
    assert answer["claimed"] == ["src/api/orders.py"]
    (other,) = answer["others"]
    assert (other["seat"], other["path"], other["note"]) == (WEB_SEAT, "src/api", "new endpoints")
    shown = ok(second(env, "claim", "src/api/orders.py", cwd=repo)).stdout
    assert "Also claimed by others" in shown and WEB_SEAT in shown
    released = ok_json(first(env, "release", "--json", cwd=repo))
    assert released["released"] == ["src/api"]
    assert claims_of(env, WEB_SEAT) == []


def test_a_path_given_from_inside_the_repository_as_absolute_is_made_relative(env, repo):
    both_in_team(env, repo)
    ok(first(env, "claim", str(repo / "src" / "cart.py"), cwd=repo / "src"))
    assert claims_of(env, WEB_SEAT) == [("src/cart.py", "hand", "")]


@pytest.mark.parametrize(
    ("args", "status", "words"),
    [
        (["../outside.py"], 1, "`..`"),
        (["src/cart.py", "--for", "25h"], 1, "at most 24h"),
        (["src/cart.py", "--for", "soon"], 2, "not understood"),
        (["/etc/passwd"], 2, "not inside this repository"),
    ],
)
def test_a_bad_claim_is_one_line_saying_what_to_do(env, repo, args, status, words):
    done = first(env, "claim", *args, cwd=repo)
    assert done.returncode == status, done.stderr
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr
    assert query(env, "SELECT COUNT(*) FROM bus_fileclaim") == [(0,)]


def test_claim_outside_any_repository_says_to_run_it_inside_one(env, tmp_path):
    done = first(env, "claim", "a.py", cwd=tmp_path)
    assert done.returncode == 2 and "no git repository" in done.stderr


def test_focus_files_claims_them_and_clearing_the_focus_releases_them(env, repo):
    both_in_team(env, repo)
    ok(first(env, "focus", "totals", "--files", "src/cart.py,src/api", cwd=repo))
    assert claims_of(env, WEB_SEAT) == [
        ("src/api", "focus", "totals"),
        ("src/cart.py", "focus", "totals"),
    ]
    said = reason(edit(env, WEB_SESSION_2, repo, repo / "src" / "cart.py"))
    assert '"totals"' in said
    ok(first(env, "focus", "totals", "--files", "src/cart.py", cwd=repo))
    assert claims_of(env, WEB_SEAT) == [("src/cart.py", "focus", "totals")]
    ok(first(env, "focus", "", cwd=repo))
    assert claims_of(env, WEB_SEAT) == []


# ---------------------------------------------------------------- where claims show


def test_agents_shows_each_seats_claims(env, repo):
    both_in_team(env, repo)
    ok(first(env, "claim", "src/cart.py", "--note", "totals", cwd=repo))
    projection = ok_json(salon(env, "agents", "--json"))
    seats = {s["seat"]: s for a in projection["agents"] for s in a["seats"]}
    (claim,) = seats[WEB_SEAT]["claims"]
    assert (claim["path"], claim["kind"], claim["note"]) == ("src/cart.py", "hand", "totals")
    assert claim["ageMinutes"] == 0 and claim["until"] > claim["since"]
    assert seats[WEB_SEAT_2]["claims"] == []
    text = ok(salon(env, "agents")).stdout
    assert "claims src/cart.py · 0m old" in text and '"totals"' in text


def test_session_start_lists_the_claims_of_other_sessions_in_this_repository(env, repo):
    both_in_team(env, repo)
    ok(first(env, "claim", "src/cart.py", "--note", "totals", cwd=repo))
    output = hook_json(hook(env, "session-start", WEB_SESSION_2, repo))
    text = output["hookSpecificOutput"]["additionalContext"]
    assert "Files claimed by other sessions of this repository" in text
    assert f'src/cart.py — {WEB_SEAT}, just now: "totals"' in text
    own = hook_json(hook(env, "session-start", WEB_SESSION, repo))
    assert "Files claimed" not in own["hookSpecificOutput"]["additionalContext"]


# ---------------------------------------------------------------- the MCP tools


async def test_the_claim_and_release_tools_of_a_stdio_server_work_in_its_project(env, repo):
    from tests.test_mcp_stdio import stdio_session

    ok(salon(env, "rooms", "--create", "team"))
    async with stdio_session(env, repo, WEB_SESSION) as session:
        claimed = await session.call_tool(
            "claim", {"paths": ["src/cart.py", str(repo / "src" / "api")], "note": "totals"}
        )
        assert not claimed.is_error, claimed.content
        assert claimed.structured_content["claimed"] == ["src/cart.py", "src/api"]
        assert claimed.structured_content["repo"] == str((repo / ".git").resolve())
        bad = await session.call_tool("claim", {"paths": ["../x"]})
        assert bad.is_error and "`..`" in bad.content[0].text
        released = await session.call_tool("release", {"paths": ["src/api"]})
        assert released.structured_content["released"] == ["src/api"]
        assert claims_of(env, WEB_SEAT) == [("src/cart.py", "hand", "totals")]
        focused = await session.call_tool("focus", {"text": "orders", "files": ["src/api/**"]})
        assert focused.structured_content["claims"]["claimed"] == ["src/api/**"]
        assert ("src/api/**", "focus", "orders") in claims_of(env, WEB_SEAT)
        await session.call_tool("focus", {"text": ""})
    assert claims_of(env, WEB_SEAT) == [("src/cart.py", "hand", "totals")]


# ---------------------------------------------------------------- in the store


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("seen_ago", "stream_open", "signed_off", "holds"),
    [
        (timedelta(seconds=5), False, False, True),  # live
        (timedelta(minutes=20), False, False, True),  # unknown: not gone
        (timedelta(minutes=31), False, False, False),  # gone
        (timedelta(minutes=31), True, False, True),  # an open stream keeps it live
        (timedelta(seconds=5), False, True, False),  # signed off since
        (None, False, False, False),  # never seen
    ],
)
def test_a_claim_holds_exactly_while_its_seat_is_not_gone(seen_ago, stream_open, signed_off, holds):
    """The SQL every claim lookup runs (the hooks' too) agrees with bus.rules.liveness."""
    from django.utils import timezone

    from bus import rules, services
    from bus.models import Seat

    seat = services.seats.check_in(agent="web-app", session_id=WEB_SESSION)
    services.claims.claim(seat=seat, repo="/r/.git", paths=["a.py"])
    at = timezone.now()
    Seat.objects.filter(pk=seat.pk).update(
        last_seen=at - seen_ago if seen_ago else None,
        live_until=at + timedelta(seconds=30) if stream_open else None,
        signed_off_at=at if signed_off else None,
    )
    seat.refresh_from_db()
    assert (seat.liveness(at) != rules.GONE) is holds
    assert bool(services.claims.open_in_repo(repo="/r/.git", at=at)) is holds
    assert bool(services.claims.claims_by_seat(seat_ids=[seat.pk], at=at)) is holds


@pytest.mark.django_db
def test_the_live_view_and_the_admin_show_the_claims(client):
    from bus import services
    from tests.live_kit import PASSWORD, seed_rows

    seed_rows()
    from bus.models import Seat

    holder = Seat.objects.get(name=WEB_SEAT)
    services.claims.claim(seat=holder, repo="/r/.git", paths=["src/login.py"], note="forms")
    services.claims.soft_claim(seat=holder, repo="/r/.git", path="src/util.py")
    client.login(username="staff", password=PASSWORD)
    page = client.get("/admin/live/?room=team").content.decode()
    row = dict(_rows(page))[WEB_SEAT]
    assert "src/login.py" in row and "src/util.py (edited)" in row and "forms" in row
    listing = client.get("/admin/bus/fileclaim/").content.decode()
    assert "src/login.py" in listing and WEB_SEAT in listing and ">open<" in listing


def _rows(page: str):
    import re

    return re.findall(r'<tr data-seat="([^"]+)">(.*?)</tr>', page, re.S)
