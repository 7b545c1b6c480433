"""`salon <command>` as people, hooks and cron run it: real processes on a real store.

Every test spawns `python -m salon.cli …` (what the `salon` script runs) against the
temporary store of the `env` fixture and reads the database back directly or with a
`--json` read. Identity comes from AGENT_SALON_NAME (or the working directory's name)
and CLAUDE_CODE_SESSION_ID, set per call.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.claude_kit import API_SEAT, WEB_SEAT, WEB_SESSION, api, salon, web
from tests.support import (
    dump_store,
    execute_store,
    query_store,
    salon_env,
    store_tables,
)

COMMANDS = [
    "send",
    "inbox",
    "peek",
    "unread",
    "history",
    "search",
    "agents",
    "focus",
    "rooms",
    "join",
    "part",
    "quiet",
    "prune",
    "token",
]


# ---------------------------------------------------------------- helpers


def ok(done):
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    assert "Traceback" not in done.stderr
    return done


def ok_json(done):
    return json.loads(ok(done).stdout)


def refused(done, *, code=None) -> str:
    """A refusal: non-zero exit, exactly one line on stderr, no traceback; the line."""
    assert done.returncode != 0, done.stdout
    if code is not None:
        assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def query(env, sql, *params):
    return query_store(env, sql, params)


def execute(env, sql, *params):
    execute_store(env, sql, params)


def dump(env) -> list[str]:
    """Every row of the database, as text: any write shows up as a difference."""
    return dump_store(env)


def meet(env):
    """Two agents' seats in room `team`."""
    ok(salon(env, "rooms", "--create", "team"))
    ok(web(env, "join", "team"))
    ok(api(env, "join", "team"))


# ---------------------------------------------------------------- the walkthrough


def test_two_agents_hold_a_conversation_through_the_command_line(env):
    meet(env)
    focus = ok(
        web(env, "focus", "wiring the login form", "--phase", "apply", "--files", "src/login.ts")
    )
    assert 'focus: "wiring the login form" [apply]' in focus.stdout

    question = ok_json(
        web(
            env,
            "send",
            "team",
            "QUESTION",
            "Which port does staging use?",
            "--to",
            API_SEAT,
            "--json",
        )
    )
    assert question["wakes"] == [API_SEAT]
    assert question["from"] == WEB_SEAT and question["to"] == [API_SEAT]

    fact = ok_json(api(env, "send", "team", "fact", "Staging is down until 14:30.", "--json"))
    assert fact["type"] == "FACT" and fact["wakes"] == []
    assert any("wakes nobody" in notice for notice in fact["notice"])

    inbox = ok(api(env, "inbox", "team")).stdout
    assert f"— QUESTION → {API_SEAT}  [{WEB_SEAT}]" in inbox
    assert "Which port does staging use?" in inbox
    assert "Staging is down" not in inbox  # its own entry is not in its inbox

    misspelt = web(env, "send", "team", "QUESTION", "and the database?", "--to", "api-servce")
    line = refused(misspelt, code=1)
    assert "api-servce" in line and "api-service" in line and API_SEAT in line

    agents = ok(salon(env, "agents")).stdout
    assert WEB_SEAT in agents and API_SEAT in agents
    assert '"wiring the login form" [apply]' in agents

    rows = query(env, 'SELECT sender, type, "to", via FROM bus_entry ORDER BY seq')
    assert [(r[0], r[1], json.loads(r[2]), r[3]) for r in rows] == [
        (WEB_SEAT, "QUESTION", [API_SEAT], "cli"),
        (API_SEAT, "FACT", [], "cli"),
    ]


def test_send_says_for_people_what_it_sent_and_whom_it_wakes(env):
    """REGRESSION: 2026-12-01 — without --json, send printed its report as JSON."""
    meet(env)
    done = ok(web(env, "send", "team", "QUESTION", "which port?", "--to", "api-service"))
    [entry] = json.loads(ok(web(env, "history", "team", "--json")).stdout)["entries"]
    assert done.stdout == (
        f"sent QUESTION to api-service in team as {WEB_SEAT} (id {entry['id']})\n"
        f"wakes: {API_SEAT}\n"
    )


# ---------------------------------------------------------------- identity


def test_the_agent_is_the_working_directory_name_when_no_name_is_set(env, tmp_path):
    project = tmp_path / "billing-svc"
    project.mkdir()
    ok(salon(env, "join", "salon", session=WEB_SESSION, cwd=project))
    assert query(env, "SELECT name FROM bus_seat") == [("billing-svc#3f9c1a20",)]


def test_an_unusable_directory_name_is_refused_naming_agent_salon_name(env, tmp_path):
    project = tmp_path / "my project"
    project.mkdir()
    before = dump(env)
    line = refused(salon(env, "join", "salon", cwd=project))
    assert "AGENT_SALON_NAME" in line
    assert dump(env) == before


def test_a_bare_caller_writes_as_the_agent_name_and_is_warned(env):
    ok(salon(env, "rooms", "--create", "team"))
    done = ok(
        salon(env, "send", "team", "FACT", "nightly build is green", "--json", agent="cron-job")
    )
    report = json.loads(done.stdout)
    assert report["from"] == "cron-job"
    assert "several processes" in report["warning"]
    assert "several processes" in done.stderr  # --json: the warning also goes to stderr


def test_a_bare_caller_joins_no_room_by_itself_and_must_join_to_read(env):
    ok(salon(env, "rooms", "--create", "team"))
    line = refused(salon(env, "inbox", "team", agent="cron-job"))
    assert "salon join team" in line
    assert query(env, "SELECT count(*) FROM bus_membership") == [(0,)]
    ok(salon(env, "join", "team", agent="cron-job"))
    ok(salon(env, "inbox", "team", agent="cron-job"))


def test_a_session_seat_joins_its_default_rooms_once(env):
    ok(web(env, "agents"))  # reads only: no check-in
    assert query(env, "SELECT count(*) FROM bus_seat") == [(0,)]
    ok(web(env, "peek", "salon"))
    assert query(
        env,
        "SELECT s.name, r.name FROM bus_membership m JOIN bus_seat s ON s.id = m.seat_id "
        "JOIN bus_room r ON r.id = m.room_id",
    ) == [(WEB_SEAT, "salon")]


# ---------------------------------------------------------------- --json contracts


def test_json_outputs_parse_and_carry_the_pinned_keys(env):
    meet(env)
    ok(web(env, "focus", "reviewing the schema"))
    report = ok_json(web(env, "send", "team", "QUESTION", "ready?", "--json"))
    assert {"id", "ts", "room", "from", "type", "to", "wakes", "notice"} <= set(report)

    inbox = ok_json(api(env, "inbox", "team", "--json"))
    assert {"room", "seat", "entries", "more", "unread", "unreadForMe", "unreadWaking"} <= set(
        inbox
    )
    entry = inbox["entries"][0]
    assert {
        "id",
        "ts",
        "from",
        "type",
        "to",
        "re",
        "content",
        "forMe",
        "wakes",
        "sibling",
        "tampered",
    } <= set(entry)
    assert entry["wakes"] is True and entry["forMe"] is True

    history = ok_json(api(env, "history", "team", "--json"))
    assert [e["content"] for e in history["entries"]] == ["ready?"]

    agents = ok_json(salon(env, "agents", "--json"))
    assert set(agents) == {"schema", "generatedAt", "agents"}
    assert agents["schema"] == "salon.agents/1"
    for agent in agents["agents"]:
        assert set(agent) == {"agent", "host", "rooms", "lastSeen", "silentMinutes", "seats"}
        for seat in agent["seats"]:
            assert set(seat) == {
                "seat",
                "session",
                "liveness",
                "lastSeen",
                "lastWrote",
                "quiet",
                "quietUntil",
                "focus",
                "claims",
                "client",
                "idleWake",
            }
            # Made by the command line alone: no client's hook or server has checked in.
            assert (seat["client"], seat["idleWake"]) == (None, None)
            assert seat["liveness"] in ("live", "unknown", "gone")
            assert seat["claims"] == []  # nobody claimed a file

    rooms = ok_json(salon(env, "rooms", "--json"))
    team = next(r for r in rooms if r["room"] == "team")
    assert team["entries"] == 1 and sorted(team["seats"]) == [API_SEAT, WEB_SEAT]


def test_json_stdout_stays_pure_when_there_are_notices(env):
    meet(env)
    done = ok(api(env, "send", "team", "FACT", "fyi", "--json"))
    assert len(done.stdout.strip().splitlines()) == 1
    assert "wakes nobody" in json.loads(done.stdout)["notice"][0]
    assert "wakes nobody" in done.stderr


# ---------------------------------------------------------------- flags and refusals


def test_help_prints_usage_and_writes_nothing(env):
    meet(env)
    before = dump(env)
    for command in COMMANDS:
        done = ok(web(env, command, "--help"))
        assert done.stdout.startswith(f"usage: salon {command}"), command
    assert dump(env) == before


def test_help_names_a_command_and_a_misspelling_is_one_did_you_mean_line(env):
    shown = ok(salon(env, "help", "send"))
    assert shown.stdout.startswith("usage: salon send")
    assert ok(salon(env, "help", "serve")).stdout.startswith("usage: salon serve")
    for argv, guess in [
        (["sned"], "`salon send`"),
        (["help", "sned"], "`salon send`"),
        (["help", "nosuch"], None),
        (["--versio"], "`salon --version`"),
    ]:
        line = refused(salon(env, *argv), code=2)
        assert line.startswith("salon: there is no "), argv
        assert argv[-1] in line and "salon --help lists them" in line, line
        if guess:
            assert f"did you mean {guess}?" in line, line


def test_prune_dry_is_refused_and_prunes_nothing(env):
    meet(env)
    execute(env, "UPDATE bus_seat SET last_seen = '2020-01-01 00:00:00', last_wrote = NULL")
    before = dump(env)
    line = refused(salon(env, "prune", "--dry"), code=2)
    assert "--dry" in line and "unrecognized" in line
    assert dump(env) == before

    listed = ok_json(salon(env, "prune", "--dry-run", "--json"))
    assert sorted(listed["seats"]) == [API_SEAT, WEB_SEAT] and listed["dryRun"] is True
    assert dump(env) == before

    ok(salon(env, "prune"))
    assert query(env, "SELECT count(*) FROM bus_seat") == [(0,)]


MISUSED = [
    ["inbox", "--", "--json"],  # --json is a flag, never a room name
    ["send", "--to", "api-service", "team"],
    ["send", "--meta", "kind=question", "team", "QUESTION", "hi"],
    ["send", "team", "NOTE", "hi"],
    ["history", "team", "--form", "web-app"],
    ["rooms", "--create", "team", "--archive", "team"],
    ["rooms", "--force"],
    ["quiet", "--for", "2x"],
    ["quiet", "--for", "2h", "--off"],
    ["focus", "x", "--phase", "coding"],
    ["unread", "team", "0"],
    ["join", "bad/room"],
    ["token", "issue", "--json"],
]


def test_a_misplaced_or_unknown_flag_is_a_usage_error_that_writes_nothing(env):
    meet(env)
    before = dump(env)
    for args in MISUSED:
        line = refused(web(env, *args), code=2)
        assert line.startswith(f"salon {args[0]}: "), args
    assert dump(env) == before
    assert query(env, "SELECT count(*) FROM bus_room WHERE name LIKE '-%'") == [(0,)]


def test_writing_into_a_room_that_does_not_exist_fails_naming_the_rooms(env):
    meet(env)
    line = refused(web(env, "send", "tema", "FACT", "hello"), code=1)
    assert "tema" in line and "team" in line and "salon rooms --create tema" in line
    assert query(env, "SELECT count(*) FROM bus_room WHERE name = 'tema'") == [(0,)]


def test_send_create_makes_the_room(env):
    ok(web(env, "send", "ops", "FACT", "deploy at noon", "--create"))
    assert query(env, "SELECT last_seq FROM bus_room WHERE name = 'ops'") == [(1,)]


def test_the_first_command_on_a_new_embedded_store_makes_its_tables(tmp_path):
    if os.environ.get("DATABASE_URL"):
        pytest.skip("the embedded store; PostgreSQL is the next test")
    (tmp_path / "fresh").mkdir()
    fresh = salon_env(tmp_path / "fresh")  # a new, empty store: never migrated

    rooms = ok(web(fresh, "rooms", "--json"))

    assert [room["room"] for room in json.loads(rooms.stdout)] == ["salon"]


def test_an_unknown_phase_lists_the_five(env):
    line = refused(web(env, "focus", "x", "--phase", "coding"), code=2)
    for phase in ("explore", "plan", "apply", "verify", "blocked"):
        assert phase in line


# ---------------------------------------------------------------- reading


def test_inbox_shows_a_tampered_entry_loudly_before_its_text(env):
    meet(env)
    ok(web(env, "send", "team", "FACT", "the deploy key is in the vault"))
    execute(env, "UPDATE bus_entry SET content = 'the deploy key is in /tmp/key'")
    out = ok(api(env, "inbox", "team")).stdout
    assert out.index("TAMPERED") < out.index("the deploy key is in /tmp/key")
    history = ok_json(api(env, "history", "team", "--json"))
    assert history["entries"][0]["tampered"] is True


def test_inbox_clips_a_long_quiet_entry_and_history_shows_it_whole(env):
    meet(env)
    text = "First sentence stays. " + "x" * 400
    ok(web(env, "send", "team", "FACT", text))
    out = ok(api(env, "inbox", "team", AGENT_SALON_INBOX_CHARS="100")).stdout
    assert "[clipped: 422 characters in all" in out
    assert "x" * 400 not in out
    assert text in ok(api(env, "history", "team")).stdout


def test_peek_leaves_the_cursor_inbox_moves_it_and_unread_moves_it_back(env):
    meet(env)
    for n in range(3):
        ok(web(env, "send", "team", "FACT", f"note {n}"))
    cursor = (
        "SELECT cursor FROM bus_membership m JOIN bus_seat s ON s.id = m.seat_id "
        "JOIN bus_room r ON r.id = m.room_id WHERE s.name = ? AND r.name = 'team'"
    )
    peeked = ok_json(api(env, "peek", "team", "--json"))
    assert len(peeked["entries"]) == 3
    assert query(env, cursor, API_SEAT) == [(0,)]

    first = ok_json(api(env, "inbox", "team", "--limit", "2", "--json"))
    assert [e["content"] for e in first["entries"]] == ["note 0", "note 1"]
    assert first["more"] == 1
    assert query(env, cursor, API_SEAT) == [(2,)]

    ok(api(env, "unread", "team", "2"))
    assert query(env, cursor, API_SEAT) == [(0,)]
    assert "nothing new" in ok(web(env, "inbox", "team")).stdout


def test_history_from_filters_by_sender_and_includes_own_entries(env):
    meet(env)
    ok(web(env, "send", "team", "FACT", "from web"))
    ok(api(env, "send", "team", "FACT", "from api"))
    own = ok_json(web(env, "history", "team", "--json"))
    assert [e["content"] for e in own["entries"]] == ["from web", "from api"]
    only_api = ok_json(web(env, "history", "team", "5", "--from", "api-service", "--json"))
    assert [e["content"] for e in only_api["entries"]] == ["from api"]


def test_a_history_that_names_no_room_covers_every_room_of_the_seat(env):
    meet(env)
    ok(web(env, "send", "team", "FACT", "in team"))
    ok(web(env, "join", "ops-room", "--create"))
    ok(web(env, "send", "ops-room", "FACT", "in ops-room"))
    every = ok_json(web(env, "history", "--json"))
    assert [(e["room"], e["content"]) for e in every["entries"]][-2:] == [
        ("team", "in team"),
        ("ops-room", "in ops-room"),
    ]
    assert "in ops-room" in ok(web(env, "history")).stdout
    # A lone number is the count: the last entry of every room of the seat.
    last = ok_json(web(env, "history", "1", "--json"))
    assert [e["content"] for e in last["entries"]] == ["in ops-room"]


def test_send_reads_text_from_stdin_and_stores_meta_and_re(env):
    meet(env)
    asked = ok_json(web(env, "send", "team", "QUESTION", "which port?", "--json"))
    ok(
        api(
            env,
            "send",
            "team",
            "ANSWER",
            "-",
            "--re",
            asked["id"],
            "--meta",
            "kind=reply",
            "ticket=OPS-7",
            stdin="8443, behind the proxy\n",
        )
    )
    row = query(env, "SELECT content, meta, re FROM bus_entry WHERE type = 'ANSWER'")[0]
    assert row[0] == "8443, behind the proxy\n"
    assert json.loads(row[1]) == {"kind": "reply", "ticket": "OPS-7"}
    assert row[2].replace("-", "") == asked["id"].replace("-", "")


# ---------------------------------------------------------------- presence


def test_agents_marks_a_quiet_without_expiry_loudly_and_a_stale_focus(env):
    meet(env)
    ok(web(env, "focus", "migrating the users table", "--phase", "apply"))
    ok(web(env, "quiet"))
    ok(api(env, "quiet", "--for", "2h"))
    execute(env, "UPDATE bus_seat SET focus_ts = '2020-01-01 00:00:00' WHERE name = ?", WEB_SEAT)
    out = ok(salon(env, "agents")).stdout
    web_line = next(line for line in out.splitlines() if WEB_SEAT in line)
    api_line = next(line for line in out.splitlines() if API_SEAT in line)
    assert "QUIET WITH NO EXPIRY" in web_line
    assert "quiet until" in api_line and "NO EXPIRY" not in api_line
    assert "STALE" in out


def test_quiet_off_ends_the_quiet(env):
    meet(env)
    ok(web(env, "quiet", "--for", "90m"))
    assert ok_json(web(env, "quiet", "--off", "--json"))["quiet"] is False
    assert query(env, "SELECT quiet FROM bus_seat WHERE name = ?", WEB_SEAT) == [(0,)]


def test_focus_reads_back_re_declares_a_phase_and_clears(env):
    meet(env)
    assert "no focus" in ok(web(env, "focus")).stdout
    refused(web(env, "focus", "--phase", "plan"), code=1)
    ok(web(env, "focus", "splitting the parser"))
    again = ok_json(web(env, "focus", "--phase", "verify", "--json"))
    assert again["focus"]["text"] == "splitting the parser"
    assert again["focus"]["phase"] == "verify"
    ok(web(env, "focus", ""))
    assert query(env, "SELECT focus_text FROM bus_seat WHERE name = ?", WEB_SEAT) == [("",)]


# ---------------------------------------------------------------- rooms, join, part


def test_rooms_archive_is_refused_while_a_live_seat_is_in_it_unless_forced(env):
    meet(env)
    line = refused(salon(env, "rooms", "--archive", "team"), code=1)
    assert "--force" in line
    ok(salon(env, "rooms", "--archive", "team", "--force"))
    assert [r["room"] for r in ok_json(salon(env, "rooms", "--archived", "--json"))] == ["team"]
    assert "team" not in [r["room"] for r in ok_json(salon(env, "rooms", "--json"))]
    ok(salon(env, "rooms", "--restore", "team"))
    assert "team" in [r["room"] for r in ok_json(salon(env, "rooms", "--json"))]
    assert query(env, "SELECT count(*) FROM bus_room WHERE name = 'team'") == [(1,)]


def test_part_leaves_the_room_and_join_comes_back(env):
    meet(env)
    ok(web(env, "part", "team"))
    assert "join it first" in refused(web(env, "inbox", "team"))
    assert "not in room" in refused(web(env, "part", "team"))
    ok(web(env, "join", "team"))
    ok(web(env, "inbox", "team"))


def test_join_a_missing_room_needs_create(env):
    line = refused(web(env, "join", "team"), code=1)
    assert "`salon join team --create`" in line, line
    assert "created" in ok(web(env, "join", "team", "--create")).stdout


def test_joining_an_archived_room_says_at_once_how_to_restore_it(env):
    ok(salon(env, "rooms", "--create", "ops"))
    ok(salon(env, "rooms", "--archive", "ops"))
    for argv in (["join", "ops"], ["join", "ops", "--create"], ["send", "ops", "FACT", "hi"]):
        line = refused(web(env, *argv), code=1)
        assert "archived: `salon rooms --restore ops`" in line, line
        assert "create" not in line, line


# ---------------------------------------------------------------- tokens


def test_token_issue_prints_the_token_and_stores_only_its_hash(env):
    token = ok(salon(env, "token", "issue", "laptop-a")).stdout.strip()
    assert token.startswith("salon_")
    hashes = [row[0] for row in query(env, "SELECT token_hash FROM bus_token")]
    assert len(hashes) == 1 and token not in hashes[0]
    listed = ok_json(salon(env, "token", "list", "--json"))
    assert [(t["label"], t["tokens"]) for t in listed] == [("laptop-a", 1)]
    assert ok_json(salon(env, "token", "revoke", "laptop-a", "--json"))["revoked"] == 1
    assert ok_json(salon(env, "token", "list", "--json")) == []


# ---------------------------------------------------------------- start-up


def test_the_bus_verbs_are_bus_commands_and_never_djangos_own():
    from bus.management import verbs

    commands = Path(__file__).resolve().parent.parent / "bus" / "management" / "commands"
    ours = {p.stem for p in commands.glob("*.py")} - {"__init__"}
    # Every verb has its manage.py form; the others there run until Ctrl-C (watch).
    assert ours - set(verbs.names()) == {"watch"}
    assert not set(verbs.names()) & {
        "migrate",
        "makemigrations",
        "serve",
        "runserver",
        "check",
        "createsuperuser",
        "shell",
        "flush",
        "showmigrations",
    }


def test_migrate_from_the_command_line_keeps_the_full_app_set(env):
    tables = store_tables(env)
    assert {"auth_user", "django_admin_log", "django_session", "bus_entry"} <= tables


def test_every_model_that_points_at_bus_rows_is_in_the_lean_app_set():
    """`prune` deletes seats from a lean command: every model holding a foreign key to a
    bus row must be loaded there, or its ON DELETE is never applied."""
    from django.apps import apps
    from django.conf import settings

    for model in apps.get_models():
        for field in model._meta.get_fields():
            target = getattr(field, "related_model", None)
            if field.concrete and field.is_relation and target and target._meta.app_label == "bus":
                assert model._meta.app_config.name in settings.CLI_APPS, model


def test_a_commands_help_is_wrapped_to_the_terminals_columns(monkeypatch):
    """The verbs' parser takes the width from COLUMNS (else the terminal, else 80), as
    argparse's own formatter does through shutil."""
    from bus.management import verbs

    monkeypatch.setenv("COLUMNS", "40")
    narrow = verbs.find("send").parser().format_help().splitlines()
    monkeypatch.setenv("COLUMNS", "not a number")  # stdout is no terminal here: 80
    wide = verbs.find("send").parser().format_help().splitlines()
    assert max(map(len, narrow)) <= 40 < max(map(len, wide)) <= 80
    assert len(narrow) > len(wide)
