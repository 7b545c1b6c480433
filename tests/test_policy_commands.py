"""`salon policy check` and `salon policy explain` as people run them, and where a project's
policy is found: the project directory the store records for its agent (a real
SessionStart hook, a real `salon install`). Real processes on a real store.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.claude_kit import WEB_SESSION, hook, hook_json, ok, ok_json, project, query, salon
from tests.support import REPO, run_salon

TODAY = datetime.now(UTC).date()
SINCE = TODAY - timedelta(days=1)
ENDS = SINCE + timedelta(days=90)


def policy_text(since=SINCE) -> str:
    return f"""\
# what web-app answers by its own code
[[grant]]
ask = "status:*"
to = ["consumer-b", "qa@macmini"]
since = {since}
serve = ["scripts/status.sh", "{{2}}"]

[[grant]]
ask = "deploy:*"
to = ["consumer-b"]
since = {since}
verdict = "gate"
"""


@pytest.fixture
def web(tmp_path) -> Path:
    """The project web-app with a policy and the script it serves (which leaves a mark
    if it ever runs)."""
    root = project(tmp_path, "web-app")
    (root / ".agent-salon").mkdir()
    (root / ".agent-salon" / "policy.toml").write_text(policy_text())
    (root / "scripts").mkdir()
    status = root / "scripts" / "status.sh"
    status.write_text(f'#!/bin/sh\ntouch {root}/ran\necho "$1 is up"\n')
    status.chmod(0o755)
    return root


def started(env, root: Path, session: str = WEB_SESSION) -> None:
    """A Claude Code session of the project starts (its SessionStart hook runs there)."""
    hook_json(hook(env, "session-start", session, root))


def explain(env, *args, cwd=None) -> dict:
    return ok_json(salon(env, "policy", "explain", *args, "--json", cwd=cwd))


def check(env, *args, cwd=None):
    return salon(env, "policy", "check", *args, cwd=cwd)


def root_of(env, agent: str):
    rows = query(env, "SELECT root FROM bus_agent WHERE name = ?", agent)
    return rows[0][0] if rows else None


# ---------------------------------------------------------------- where the policy is


def test_a_session_start_records_the_project_and_explain_reads_its_policy_there(env, web):
    started(env, web)
    assert root_of(env, "web-app") == str(web)

    found = explain(env, "web-app", "status:db", "--as", "consumer-b#3f9c1a20")
    assert found == {
        "agent": "web-app",
        "key": "status:db",
        "writer": "consumer-b#3f9c1a20",
        "root": str(web),
        "policyFile": str(web / ".agent-salon" / "policy.toml"),
        "policyFound": True,
        "verdict": "serve",
        "reason": f"granted to consumer-b until {ENDS}",
        "argv": ["scripts/status.sh", "db"],
        "line": 2,
    }
    shown = ok(salon(env, "policy", "explain", "web-app", "status:db", "--as", "consumer-b"))
    assert shown.stdout.splitlines() == [
        f"serve: granted to consumer-b until {ENDS}",
        "  would run: scripts/status.sh db",
        f"  in {web} (nothing was run)",
        f"  the grant: {web}/.agent-salon/policy.toml, line 2",
    ]
    assert not (web / "ran").exists(), "explain runs nothing"


def test_the_last_session_start_of_an_agent_decides_where_its_project_is(env, web, tmp_path):
    started(env, web)
    (tmp_path / "clone").mkdir()
    elsewhere = project(tmp_path / "clone", "web-app")
    started(env, elsewhere, session="aa11bb22-0000-4c1d-9a2f-0e1d2c3b4a51")
    assert root_of(env, "web-app") == str(elsewhere)
    found = explain(env, "web-app", "status:db", "--as", "consumer-b")
    assert (found["verdict"], found["reason"]) == (
        "wake",
        "no policy: this project has not opted in",
    )
    assert found["root"] == str(elsewhere) and found["policyFound"] is False


def test_salon_install_records_the_project(env, web, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    path = os.pathsep.join(
        d for d in env["PATH"].split(os.pathsep) if d and not (Path(d) / "claude").exists()
    )
    installing = {k: v for k, v in env.items() if k != "CLAUDE_CONFIG_DIR"}
    ok(run_salon("install", "team", env=dict(installing, HOME=str(home), PATH=path), cwd=web))
    assert root_of(env, "web-app") == str(web)
    assert explain(env, "web-app", "deploy:prod", "--as", "consumer-b")["verdict"] == "gate"


def test_an_agent_with_no_project_recorded_wakes_as_before_and_explain_says_why(env):
    ok(salon(env, "send", "salon", "FACT", "from cron", agent="nightly"))
    found = explain(env, "nightly", "status:db", "--as", "consumer-b")
    assert (found["verdict"], found["root"]) == ("wake", None)
    shown = ok(salon(env, "policy", "explain", "nightly", "status:db")).stdout
    assert shown.splitlines() == [
        "wake: no policy: this project has not opted in",
        "  no project directory is recorded for nightly: `salon install` there, or a "
        "session start there, records it",
    ]


def test_explain_for_an_agent_the_store_never_saw_is_one_line(env):
    done = salon(env, "policy", "explain", "nobody", "status:db")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "salon policy: there is no agent 'nobody' on this store (`salon agents` lists those "
        "with seats); its project is recorded by `salon install` there or a session start"
    ]


# ---------------------------------------------------------------- explain: the verdicts


def test_explain_shows_each_verdict_with_the_reason_the_asker_would_get(env, web):
    started(env, web)
    remote = explain(env, "web-app", "status:db", "--as", "consumer-b@mac-mini#4289030d")
    assert (remote["verdict"], remote["reason"]) == (
        "deny",
        'no grant reaches "status:db" for consumer-b@mac-mini#4289030d',
    )
    device = explain(env, "web-app", "status:db", "--as", "qa@macmini#7b02e5d1")
    assert (device["verdict"], device["argv"]) == ("serve", ["scripts/status.sh", "db"])
    probe = explain(env, "web-app", "status:../../etc/passwd", "--as", "consumer-b")
    assert (probe["verdict"], probe["reason"]) == (
        "wake",
        'nothing in the policy covers "status:../../etc/passwd"',
    )
    assert explain(env, "web-app", "deploy:prod", "--as", "consumer-b")["verdict"] == "gate"
    # without --as: the caller itself, a writer on this machine
    mine = explain(env, "web-app", "status:db", cwd=project(web.parent, "consumer-b"))
    assert (mine["writer"], mine["verdict"]) == ("consumer-b", "serve")
    assert not (web / "ran").exists()


def test_a_policy_edited_into_something_invalid_wakes_naming_the_line(env, web):
    started(env, web)
    policy = web / ".agent-salon" / "policy.toml"
    policy.write_text(policy_text().replace('verdict = "gate"', 'verdict = "gate"\nserve = ["x"]'))
    found = explain(env, "web-app", "status:db", "--as", "consumer-b")
    assert found["verdict"] == "wake" and found["argv"] is None
    assert found["reason"] == (
        "the policy cannot be read (line 12: the grant has both serve and verdict: keep one): "
        "nothing is served until it is fixed"
    )


def test_a_fifo_where_the_policy_should_be_cannot_hold_the_command(env, web):
    started(env, web)
    policy = web / ".agent-salon" / "policy.toml"
    policy.unlink()
    os.mkfifo(policy)
    done = salon(env, "policy", "explain", "web-app", "status:db", "--as", "consumer-b", "--json")
    found = json.loads(ok(done).stdout)
    assert found["verdict"] == "wake"
    assert found["reason"].startswith("the policy cannot be read (it is not a regular file)")


# ---------------------------------------------------------------- check


def test_check_of_a_clean_policy_says_so_and_exits_0(env, web):
    done = ok(check(env, cwd=web))
    assert done.stdout == f"{web}/.agent-salon/policy.toml: 2 grants, no problems\n"
    assert ok(check(env, str(web / ".agent-salon" / "policy.toml"))).stdout == done.stdout


def test_check_prints_one_line_per_problem_with_its_line_and_exits_1(env, web, tmp_path):
    outside = tmp_path / "outside.sh"
    outside.write_text("#!/bin/sh\necho out\n")
    outside.chmod(0o755)
    (web / "scripts" / "link.sh").symlink_to(outside)
    (web / "scripts" / "plain.sh").write_text("#!/bin/sh\necho plain\n")
    file = web / ".agent-salon" / "policy.toml"
    file.write_text(
        f"""\
[[grant]]
ask = "status:*"
to = ["consumer-b"]
since = {SINCE}
until = {SINCE + timedelta(days=200)}
serve = ["scripts/status.sh", "{{2}}"]

[[grant]]
ask = "link"
to = ["consumer-b"]
since = {SINCE}
serve = ["scripts/link.sh"]

[[grant]]
ask = "plain"
to = ["consumer-b"]
since = {SINCE}
serve = ["scripts/plain.sh"]

[[grant]]
ask = "Status:DB"
to = ["consumer-b"]
since = {SINCE}
verdict = "deny"
colour = "red"

[[grant]]
ask = "both"
to = ["consumer-b"]
since = {SINCE}
serve = ["/usr/bin/env"]
verdict = "wake"
"""
    )
    done = check(env, str(web))
    assert done.returncode == 1 and done.stderr == ""
    assert done.stdout.splitlines() == [
        f'{file}:5: the grant for "status:*" runs from {SINCE} until '
        f"{SINCE + timedelta(days=200)}, longer than 90 days: it ends on {ENDS}; set until "
        "to that date at the latest",
        f'{file}:12: the serve program "scripts/link.sh" leads outside the project (to '
        f"{outside}): keep the program inside the project's directory",
        f'{file}:18: the serve program "scripts/plain.sh" is not executable: chmod +x '
        "scripts/plain.sh",
        f'{file}:21: the pattern "Status:DB" can never match a key (it holds the upper-case '
        '"S" (keys are lower case)); a pattern is segments like a key\'s, joined by ":", '
        "where * stands for exactly one segment",
        f'{file}:25: unknown key "colour" in a grant: a grant holds ask, to, since, until '
        "(optional), and serve or verdict",
        f"{file}:32: the grant has both serve and verdict: keep one",
    ]
    as_json = json.loads(check(env, str(web), "--json").stdout)
    assert [problem["line"] for problem in as_json["problems"]] == [5, 12, 18, 21, 25, 32]


def test_check_where_there_is_no_policy_says_the_project_has_not_opted_in(env, tmp_path):
    done = check(env, str(tmp_path))
    assert done.returncode == 1
    assert done.stdout == (
        f"{tmp_path}/.agent-salon/policy.toml: no policy file here: this project has not "
        "opted in, and requests to it wake a person as before (write .agent-salon/policy.toml "
        "in the project's root)\n"
    )
    missing = check(env, str(tmp_path / "nope"))
    assert missing.returncode == 1 and "there is no such directory or file" in missing.stdout


def test_check_and_explain_answered_by_a_running_server_read_the_callers_project(
    env, web, tmp_path, short_tmp
):
    """A server of the store answers the command from its own working directory: the
    command sends the project's whole path."""
    from tests.test_local_line import stdio_server, wait_for_socket

    poison = tmp_path / "poison" / "django"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('answered here, not by a server')\n")
    lined = dict(env, TMPDIR=short_tmp)
    server = stdio_server(
        lined, project(tmp_path, "docs-site"), "d0c5d0c5-0000-4000-8000-000000000002"
    )
    try:
        wait_for_socket(lined, server)
        no_django = dict(lined, PYTHONPATH=os.pathsep.join([str(poison.parent), str(REPO)]))
        done = ok(check(no_django, cwd=web))
        assert done.stdout == f"{web}/.agent-salon/policy.toml: 2 grants, no problems\n"
    finally:
        server.stdin.close()
        server.wait(15)


# ---------------------------------------------------------------- what the wiring calls


@pytest.mark.django_db
def test_a_request_to_an_agent_is_decided_and_served_by_two_calls(web):
    """What send will call: the receiving agent's verdict (services.requests.evaluate),
    then, to serve, the runner in the recorded project."""
    from django.conf import settings

    from bus import services
    from relay import runner

    services.seats.record_root(agent="web-app", root=str(web))
    verdict = services.requests.evaluate(agent="web-app", key="status:db", writer="consumer-b#1")
    assert (verdict.verdict, verdict.argv) == ("serve", ("scripts/status.sh", "db"))
    served = runner.serve(
        verdict.argv,
        root=services.requests.root_of("web-app"),
        key="status:db",
        asker="consumer-b#1",
        timeout=settings.SERVE_TIMEOUT,
    )
    assert (served.status, served.output) == ("ok", "db is up\n")
    assert (web / "ran").exists()


@pytest.mark.django_db
def test_a_working_directory_that_is_no_absolute_path_records_nothing(web):
    from bus import services
    from bus.models import Agent

    services.seats.record_root(agent="web-app", root=str(web))
    for odd in ("relative/dir", "", "/tmp/a\nb", "/" + "x" * 5000):
        services.seats.record_root(agent="web-app", root=odd)
    assert Agent.objects.get(name="web-app").root == str(web)
    services.seats.record_root(agent="web-app", root=f"{web}/./sub/..")
    assert Agent.objects.get(name="web-app").root == str(web)
