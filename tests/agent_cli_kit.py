"""What the tests of the real agent CLIs share (tests/test_codex_cli.py,
tests/test_gemini_cli.py): a git project, the other project's asking session (`api`, a
plain `salon` command line with a session id, in the room `team`), and what the store
and the stand-in model say afterwards.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

from tests.support import query_store, run_salon, stretched


def installed_cli(bin_variable: str, dir_variable: str, default_dir: Path, name: str):
    """(the CLI's path, whether it is there to run): the file `bin_variable` names, else
    `node_modules/.bin/NAME` in the throw-away directory `dir_variable` names (else
    `default_dir`) that the CLI's install script fills."""
    named = os.environ.get(bin_variable)
    directory = Path(os.environ.get(dir_variable) or default_dir)
    path = Path(named) if named else directory / "node_modules" / ".bin" / name
    return path, path.exists() and os.access(path, os.X_OK)


def skip_without(path: Path, script: str, bin_variable: str) -> None:
    pytest.skip(f"{path.name} not found at {path}; run {script} or set {bin_variable}")


def run_cli(binary: Path, args, *, cwd: Path, env: dict[str, str], timeout: float = 120):
    """One run of a real agent CLI: no input, its output captured, its deadline stretched
    with the machine's load."""
    return subprocess.run(
        [str(binary), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=stretched(timeout),
        stdin=subprocess.DEVNULL,
    )


def installed_project(tmp_path: Path, env: dict[str, str], client: str) -> Path:
    """`web-app`, a git repository wired with `salon install --client CLIENT team`; the
    store is named by a variable, so the commands name this machine's paths."""
    directory = new_repo(tmp_path / "web-app")
    done = run_salon("install", "--client", client, "team", env=env, cwd=directory)
    assert done.returncode == 0, done.stderr
    return directory


QUESTION = "Which port does the staging API listen on?"
API_SESSION = "c4e1b7d2-8a9f-4e3d-b2c1-a0f9e8d7c6b5"


def git(directory: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(directory), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def new_repo(directory: Path) -> Path:
    directory.mkdir(parents=True)
    git(directory, "init", "-q")
    git(directory, "config", "user.email", "t@example.invalid")
    git(directory, "config", "user.name", "t")
    (directory / "src").mkdir()
    (directory / "src" / "app.py").write_text("PORT = 8080\n")
    git(directory, "add", "-A")
    git(directory, "commit", "-q", "-m", "start")
    return directory


def api(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """A command of the other project's session (agent `api`, in the room `team`)."""
    where = tmp_path / "api"
    where.mkdir(exist_ok=True)
    environment = {**env, "AGENT_SALON_NAME": "api", "AGENT_SALON_ROOM": "team",
                   "CLAUDE_CODE_SESSION_ID": API_SESSION}  # fmt: skip
    return run_salon(*args, env=environment, cwd=where)


def ask(env: dict[str, str], tmp_path: Path) -> dict:
    done = api(env, tmp_path, "send", "team", "QUESTION", QUESTION, "--to", "web-app", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def seats(env: dict[str, str], agent: str = "web-app") -> list[tuple[str, str]]:
    return query_store(
        env,
        "SELECT s.name, s.client FROM bus_seat s JOIN bus_agent a ON a.id = s.agent_id "
        "WHERE a.name = ? ORDER BY s.name",
        (agent,),
    )


def told_once(stand_in) -> None:
    """The question reached the model, and in one item of its conversation only: no
    request shows it twice, and none after the first lacks it (the history holds it)."""
    shown = [r.count(QUESTION) for r in stand_in.model_requests]
    assert max(shown) == 1, shown
    first = shown.index(1)
    assert all(n == 1 for n in shown[first:]), shown


def answered_and_woke_the_asker(env: dict[str, str], tmp_path: Path, question: dict) -> None:
    """web-app's ANSWER to `question` is stored with `re`, woke the asking session's seat,
    and is what the asker's inbox shows."""
    [[entry_id, sender]] = query_store(
        env,
        "SELECT id, sender_agent FROM bus_entry WHERE re = ?",
        (question["id"].replace("-", ""),),  # a UUID is stored as 32 hex digits
    )
    assert sender == "web-app"
    woken = query_store(
        env,
        "SELECT s.name FROM bus_wakedecision w JOIN bus_seat s ON s.id = w.seat_id "
        "WHERE w.entry_id = ? AND w.woken",
        (entry_id,),
    )
    assert [name for (name,) in woken] == [f"api#{API_SESSION[:8]}"], woken
    read = api(env, tmp_path, "inbox", "team", "--json")
    assert read.returncode == 0, read.stderr
    [got] = [e for e in json.loads(read.stdout)["entries"] if e["type"] == "ANSWER"]
    assert (got["content"], got["re"]) == ("8443.", question["id"])


def asking_during(replies: list, starts_wait, env: dict[str, str], tmp_path: Path, last):
    """A stand-in's script: `replies` in order (then `last`); once the reply for which
    `starts_wait(reply)` is true is given (the model's call of `wait`), the question is
    asked two seconds later, from a thread, while the call waits. `.reports` holds the
    send report."""
    items = iter(replies)

    def model(request):
        reply = next(items, last)
        if starts_wait(reply):
            threading.Timer(2.0, lambda: model.reports.append(ask(env, tmp_path))).start()
        return reply

    model.reports = []
    return model


FOCUS = {"text": "moving the staging port"}
CLAIM = {"paths": ["src/app.py"], "note": "port change"}


def focused_claimed_and_listed(env: dict[str, str], seat: str, listed: str, client: str):
    """The session's focus and claim tools acted as its own seat, and its agents tool
    listed that seat with its client."""
    [(focus,)] = query_store(env, "SELECT focus_text FROM bus_seat WHERE name = ?", (seat,))
    assert focus == FOCUS["text"]
    claims = query_store(
        env,
        "SELECT c.path, c.note FROM bus_fileclaim c JOIN bus_seat s ON s.id = c.seat_id "
        "WHERE s.name = ? AND c.released_at IS NULL",
        (seat,),
    )
    assert claims == [("src/app.py", CLAIM["note"])], claims
    said = listed.replace('\\"', '"')  # a client may show the result as a JSON string
    assert seat in said and re.search(f'"client": ?"{client}"', said), listed
