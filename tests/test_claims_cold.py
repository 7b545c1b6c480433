"""The edit hooks' writes on the SQLite store without Django (mcpgate.claude.claimwrite):
a denied edit, a repeat let through again, an edit's soft claim. Real `salon hook`
processes on a real store; "cold" runs put a `django` package that refuses to import
first on the path, so whatever they did was done without Django. The rows are held to
the ones the services write, and to the services' own connection settings."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bus import claimpaths, claimsql, ledger, rules
from mcpgate.claude import claimwrite
from tests import test_claims
from tests.claude_kit import (
    WEB_SEAT,
    WEB_SEAT_2,
    WEB_SESSION,
    WEB_SESSION_2,
    hook,
    hook_input,
    ok,
    query,
)
from tests.support import Daemon, salon_cmd, stretched
from tests.test_claims import (
    both_in_team,
    edit,
    edited,
    facts_to,
    first,
    reason,
    says_who_holds_cart,
)

ON_POSTGRES = bool(os.environ.get("DATABASE_URL"))
# The same store and repository as the claims suite.
env, repo = test_claims.env, test_claims.repo
sqlite_only = pytest.mark.skipif(
    ON_POSTGRES, reason="PostgreSQL: the edit hooks write through a server or Django only"
)
PRAGMAS = ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")
STORED_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?")


@pytest.fixture
def cold(env, tmp_path):
    """env, with Django refusing to import: a hook that needed it logs an error and prints
    nothing, so any output or row of such a hook was made without it."""
    blocked = tmp_path / "no-django"
    (blocked / "django").mkdir(parents=True)
    (blocked / "django" / "__init__.py").write_text(
        'raise ImportError("this process was to run without Django")\n'
    )
    return dict(env, PYTHONPATH=f"{blocked}{os.pathsep}{env['PYTHONPATH']}")


def hooks_log(env) -> str:
    log = Path(env["AGENT_SALON_DB"]).parent / "agent-salon-hooks.log"
    return log.read_text() if log.exists() else ""


def seated(env, repo, *sessions):
    """Both sessions in `team`; each of `sessions` has just started (its sign of life,
    and the hook's stamp of it, fresh)."""
    both_in_team(env, repo)
    for session in sessions:
        assert hook(env, "session-start", session, repo).returncode == 0


def forget_stamp(env, session):
    """As if the session's last sign of life were over a minute old: its next hook goes
    the slow way (Django), which writes the sign of life."""
    runtime = Path(env["TMPDIR"]) / f"agent-salon-{os.getuid()}"
    stamps = list(runtime.glob(f"beat-*-{session}"))
    assert stamps, f"no stamp of {session} in {runtime}"
    for stamp in stamps:
        stamp.unlink()


def rows(env, table, where="1 = 1", *params):
    columns = [c for (_, c, *_) in query(env, f"PRAGMA table_info({table})")]
    typed = ", ".join(f"typeof({c})" for c in columns)
    return [
        (dict(zip(columns, values[: len(columns)], strict=True)), values[len(columns) :])
        for values in query(env, f"SELECT *, {typed} FROM {table} WHERE {where}", *params)
    ]


def seat_id(env, name):
    return query(env, "SELECT id FROM bus_seat WHERE name = ?", name)[0][0]


# ---------------------------------------------------------------- one place for each rule


def test_the_hooks_writes_use_the_rules_values_and_the_tables_django_made():
    from bus.models import ClaimDenial, FileClaim, Room

    assert timedelta(minutes=claimwrite.SOFT_CLAIM_MINUTES) == rules.SOFT_CLAIM
    assert timedelta(minutes=claimwrite.REPEAT_WINDOW_MINUTES) == rules.REPEAT_WINDOW
    assert claimpaths.MAX_PATH_CHARS == rules.MAX_FOCUS_PATH_CHARS
    assert (
        FileClaim._meta.db_table,
        ClaimDenial._meta.db_table,
    ) == (claimsql.CLAIM, claimsql.DENIAL)
    assert Room._meta.db_table == ledger.ROOM


@given(st.text(alphabet=st.sampled_from("ab./\\ \t\x01\x7f*é"), max_size=12))
def test_a_path_stored_as_is_is_one_the_rules_keep_unchanged(path):
    if claimpaths.stored_as_is(path):
        assert rules.normalize_claim_path(path) == path


@pytest.mark.parametrize(
    ("path", "as_is"),
    [
        ("src/cart.py", True),
        ("a b/c d.py", True),
        ("./src/cart.py", False),
        ("src//cart.py", False),
        ("src\\cart.py", False),
        (" cart.py", False),
        ("a/../b", False),
        ("x" * 257, False),
    ],
)
def test_only_a_path_already_in_its_stored_spelling_is_written_by_the_hook(path, as_is):
    assert claimpaths.stored_as_is(path) is as_is


@sqlite_only
@pytest.mark.django_db
def test_the_hook_opens_the_store_exactly_as_django_does(tmp_path):
    from django.db import connection

    with connection.cursor() as cursor:
        django_side = []
        for pragma in PRAGMAS:
            cursor.execute(f"PRAGMA {pragma}")
            django_side.append(cursor.fetchone()[0])
    hook_side = claimwrite._connect(str(tmp_path / "store.db"))
    try:
        found = [hook_side.execute(f"PRAGMA {p}").fetchone()[0] for p in PRAGMAS]
    finally:
        hook_side.close()
    assert found == django_side == ["wal", 2, 20000, 1]
    assert connection.settings_dict["OPTIONS"]["transaction_mode"] == claimwrite.SQLITE_BEGIN
    assert connection.settings_dict["OPTIONS"]["timeout"] == claimwrite.SQLITE_TIMEOUT


# ---------------------------------------------------------------- without Django


@sqlite_only
def test_a_denied_edit_and_a_later_repeat_are_written_without_django(env, cold, repo):
    seated(env, repo, WEB_SESSION_2)
    ok(first(env, "focus", "splitting the cart totals", cwd=repo))
    ok(first(env, "claim", "src/cart.py", "--note", "halfway through totals", cwd=repo))
    cart = repo / "src" / "cart.py"
    says_who_holds_cart(reason(edit(cold, WEB_SESSION_2, repo, cart)))
    ((denial, _),) = rows(env, "bus_claimdenial")
    assert (denial["seat_id"], denial["holder_id"], denial["path"], denial["passed_at"]) == (
        seat_id(env, WEB_SEAT_2),
        seat_id(env, WEB_SEAT),
        "src/cart.py",
        None,
    )
    # The first repeat tells the holder by a FACT: that one is Django's (the send path).
    assert edit(env, WEB_SESSION_2, repo, cart) is None
    (fact,) = facts_to(env, WEB_SEAT)
    assert WEB_SEAT_2 in fact and "src/cart.py" in fact
    ((after_first, _),) = rows(env, "bus_claimdenial")
    # A later repeat goes ahead without Django, telling nobody again.
    assert edit(cold, WEB_SESSION_2, repo, cart) is None
    ((after_second, _),) = rows(env, "bus_claimdenial")
    assert after_second["passed_at"] > after_first["passed_at"]
    assert len(facts_to(env, WEB_SEAT)) == 1
    assert hooks_log(env) == ""


@sqlite_only
def test_a_first_repeat_without_django_never_fails_the_edit_and_tells_nobody_yet(env, cold, repo):
    seated(env, repo, WEB_SESSION_2)
    ok(first(env, "claim", "src/cart.py", cwd=repo))
    cart = repo / "src" / "cart.py"
    reason(edit(cold, WEB_SESSION_2, repo, cart))
    # No Django, no server: the FACT cannot be sent, so nothing is written, and the edit
    # is not held back (the failure is one line in the hooks' log).
    assert edit(cold, WEB_SESSION_2, repo, cart) is None
    assert [r["passed_at"] for r, _ in rows(env, "bus_claimdenial")] == [None]
    assert "ImportError" in hooks_log(env)
    assert edit(env, WEB_SESSION_2, repo, cart) is None
    assert len(facts_to(env, WEB_SEAT)) == 1


@sqlite_only
def test_an_edit_claims_its_file_softly_without_django_and_holds_the_next_session_back(
    env, cold, repo
):
    seated(env, repo, WEB_SESSION, WEB_SESSION_2)
    cart = repo / "src" / "cart.py"
    assert edited(cold, WEB_SESSION, repo, cart) is None
    ((claim, _),) = rows(env, "bus_fileclaim")
    assert (claim["path"], claim["kind"], claim["note"], claim["released_at"]) == (
        "src/cart.py",
        "soft",
        "",
        None,
    )
    said = reason(edit(cold, WEB_SESSION_2, repo, cart))
    assert WEB_SEAT in said and "a claim made by editing" in said
    # Another edit soon after writes nothing more.
    assert edited(cold, WEB_SESSION, repo, cart) is None
    assert [r for r, _ in rows(env, "bus_fileclaim")] == [claim]
    assert hooks_log(env) == ""


@sqlite_only
def test_the_rows_are_the_same_whichever_path_wrote_them(env, cold, repo):
    """WEB_SESSION writes without Django, WEB_SESSION_2 through the services."""
    seated(env, repo, WEB_SESSION)
    cart, orders = repo / "src" / "cart.py", repo / "src" / "api" / "orders.py"
    assert edited(cold, WEB_SESSION, repo, cart) is None
    assert edited(env, WEB_SESSION_2, repo, orders) is None  # no stamp yet: the slow path
    by_hook, by_services = (
        rows(env, "bus_fileclaim", "path = ?", "src/cart.py"),
        rows(env, "bus_fileclaim", "path = ?", "src/api/orders.py"),
    )
    (hook_row, hook_types), (services_row, services_types) = by_hook[0], by_services[0]
    assert hook_types == services_types
    for row in (hook_row, services_row):
        assert STORED_TIME.fullmatch(row["created_at"]) and STORED_TIME.fullmatch(row["expires_at"])
        created, expires = (datetime.fromisoformat(row[k]) for k in ("created_at", "expires_at"))
        assert expires - created == rules.SOFT_CLAIM
    assert services_row["id"] == hook_row["id"] + 1
    for row in (hook_row, services_row):
        del row["id"], row["seat_id"], row["path"], row["created_at"], row["expires_at"]
    assert hook_row == services_row
    # Each edits the other's file: WEB_SESSION is held back without Django, WEB_SESSION_2
    # by the services (its stamp, written by its last hook, forgotten).
    forget_stamp(env, WEB_SESSION_2)
    said_by_hook = reason(edit(cold, WEB_SESSION, repo, orders))
    said_by_services = reason(edit(env, WEB_SESSION_2, repo, cart))
    denials = rows(env, "bus_claimdenial")
    assert [r["seat_id"] for r, _ in denials] == [
        seat_id(env, WEB_SEAT),
        seat_id(env, WEB_SEAT_2),
    ]
    assert denials[0][1] == denials[1][1]
    assert all(STORED_TIME.fullmatch(r["denied_at"]) for r, _ in denials)

    # The same words, but for the file, the holder and the command that asks it.
    def words(said: str) -> str:
        head, _, tail = said.partition(" — ")
        return re.sub(r"src/\S+|web-app#\w+", "…", head + tail.partition(" — ")[2])

    assert words(said_by_hook) == words(said_by_services)
    assert hooks_log(env) == ""


# ---------------------------------------------------------------- beside a daemon


@sqlite_only
def test_hooks_write_without_django_beside_a_daemon_writing_the_same_store(
    env, cold, repo, tmp_path
):
    """Six soft claims by hooks and six sends answered by the daemon, all at once (the
    sends run without Django too: only the daemon can have written them)."""
    # A short runtime directory: the daemon's socket path must fit in 108 bytes.
    short = Path(tempfile.mkdtemp(prefix="sc-"))
    env, cold = dict(env, TMPDIR=str(short)), dict(cold, TMPDIR=str(short))
    daemon = Daemon(env=env, cwd=tmp_path).start()
    try:
        _beside(env, cold, repo)
    finally:
        daemon.stop()
        shutil.rmtree(short, ignore_errors=True)


def _beside(env, cold, repo):
    seated(env, repo, WEB_SESSION)
    processes = []
    for n in range(6):
        path = repo / "src" / f"part{n}.py"
        payload = hook_input(
            "heartbeat",
            WEB_SESSION,
            repo,
            tool_name="Write",
            tool_input={"file_path": str(path), "content": "x"},
            tool_response={"type": "create", "filePath": str(path)},
        )
        processes.append((salon_cmd("hook", "heartbeat"), cold, payload))
        sender = dict(cold, AGENT_SALON_NAME="web-app", CLAUDE_CODE_SESSION_ID=WEB_SESSION_2)
        processes.append((salon_cmd("send", "team", "FACT", f"step {n}"), sender, ""))
    running = [
        (
            subprocess.Popen(
                argv,
                env=environment,
                cwd=repo,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
            stdin,
        )
        for argv, environment, stdin in processes
    ]
    for process, stdin in running:
        out, err = process.communicate(stdin, timeout=stretched(60))
        assert (process.returncode, err) == (0, ""), (process.args, out, err)
    claimed = query(
        env,
        "SELECT path, kind FROM bus_fileclaim WHERE seat_id = ? ORDER BY path",
        seat_id(env, WEB_SEAT),
    )
    assert claimed == [(f"src/part{n}.py", "soft") for n in range(6)]
    sent = query(env, "SELECT content FROM bus_entry WHERE content LIKE 'step %' ORDER BY 1")
    assert sent == [(f"step {n}",) for n in range(6)]
    assert hooks_log(env) == ""


# ---------------------------------------------------------------- hostile rows


@sqlite_only
@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("created_at", "'not a time'"),
        ("expires_at", "'not a time'"),
        ("note", "CAST(X'FFFE41' AS TEXT)"),
        ("path", "CAST(X'7372632FFF' AS TEXT)"),
        ("kind", "X'00'"),
        ("seat_id", "999999"),
    ],
)
def test_a_hostile_claim_row_never_fails_an_edit(env, cold, repo, column, value):
    seated(env, repo, WEB_SESSION_2)
    ok(first(env, "claim", "src/cart.py", "src/api", cwd=repo))
    from tests.claude_kit import execute

    execute(env, f"UPDATE bus_fileclaim SET {column} = {value} WHERE path = 'src/cart.py'")
    for environment in (cold, env):
        for kind in ("pre-edit", "heartbeat"):
            for path in (repo / "src" / "cart.py", repo / "src" / "api" / "orders.py"):
                done = hook(
                    environment, kind, WEB_SESSION_2, repo,
                    tool_name="Edit", tool_input={"file_path": str(path)},
                    tool_response={"filePath": str(path)},
                )  # fmt: skip
                assert (done.returncode, done.stderr) == (0, ""), done.stderr
                assert done.stdout == "" or '"permissionDecision": "deny"' in done.stdout
