"""Security review of 2026-12-01: the store's files, the secret, `salon install`, the hook
log, the bind warning and `salon mcp`'s input — checked on disk and on real processes.

Findings that the code does not fix yet are xfail(strict=True, reason="finding N: …"):
remove the mark with the fix. The mode tests run with umask 022, a typical user's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.security_kit import (
    TRACEBACK,
    admin_client,
    claude_session_id,
    cli,
    hook_payload,
    mode,
    notify,
    private_env,
    run_hook,
    strict_json,
    unique,
    wait_until,
)
from tests.support import (
    Daemon,
    drop_store,
    free_port,
    make_staff,
    query_store,
    salon_cmd,
    salon_env,
)

PASSWORD = "correct horse battery staple"
UMASK = 0o022
ROOT = os.geteuid() == 0
PROBE_USER = "salon-probe"

sqlite_only = pytest.mark.skipif(
    bool(os.environ.get("DATABASE_URL")), reason="the files of the embedded SQLite store"
)


def xfail(finding: int, what: str):
    return pytest.mark.xfail(strict=True, reason=f"finding {finding}: {what}")


def start_daemon(env: dict[str, str], cwd: Path) -> Daemon:
    """A real daemon started with a typical umask (the mode of what it creates)."""
    old = os.umask(UMASK)
    try:
        return Daemon(env=env, cwd=cwd).start()
    finally:
        os.umask(old)


def secret_files(data: Path) -> list[Path]:
    return [p for p in data.iterdir() if "secret" in p.name]


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, f"wanted one line, got {len(lines)}:\n{text[-2000:]}"
    assert TRACEBACK not in text
    return lines[0]


def default_store_env(home: Path, **extra: str) -> tuple[dict[str, str], Path]:
    """An environment that names no store, so the shared default in `home`'s data
    directory is used (made on first use); and that directory."""
    env = salon_env(home / "unused", **extra)
    del env["AGENT_SALON_DB"]
    env.pop("XDG_DATA_HOME", None)
    env["HOME"] = str(home)
    return env, home / ".local" / "share" / "agent-salon"


def private_store(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A migrated store whose directory, database and secret are all private."""
    env = private_env(tmp_path)
    data = Path(env["AGENT_SALON_DB"]).parent
    data.chmod(0o700)
    Path(env["AGENT_SALON_DB"]).chmod(0o600)
    done = cli("rooms", env=env, umask=UMASK)  # first use: the secret is made
    assert done.returncode == 0, done.stderr
    for path in data.iterdir():
        path.chmod(0o600)
    return env, data


# ---------------------------------------------------------------- finding 2: the store's files


@sqlite_only
def test_first_use_makes_a_private_data_directory_and_store(tmp_path):
    """REGRESSION: 2026-12-01 — after first use the data directory was 0755 and salon.db
    0644 (with -wal/-shm 0644 while in use): every local user could read every entry and
    the admin's sessions. Wanted: the directory 0700, every file in it 0600 (umask 022)."""
    env, data = default_store_env(tmp_path, TMPDIR=str(tmp_path))  # nothing there yet
    done = cli("migrate", "--verbosity", "0", env=env, umask=UMASK)
    assert done.returncode == 0, done.stderr
    assert (data / "salon.db").exists() and secret_files(data)
    assert mode(data) == 0o700
    for path in data.iterdir():
        assert mode(path) & 0o077 == 0, f"{path.name} is {oct(mode(path))}"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A daemon that made its own store on first start, under a directory every local
    user may enter (as a home directory is), with a superuser logged in once."""
    base = Path(tempfile.mkdtemp(prefix="salon-sec-", dir="/tmp"))
    base.chmod(0o755)
    logs = tmp_path_factory.mktemp("served")
    env, data = default_store_env(base, TMPDIR=str(logs))
    daemon = start_daemon(env, logs)  # it makes the shared default store on first start
    env["AGENT_SALON_DB"] = str(data / "salon.db")  # the same store, named for the helpers
    try:
        assert notify(daemon.url, {"content": "a write, so the WAL is in use"}).status_code == 202
        make_staff(env, PASSWORD, username="boss")
        admin_client(daemon.url, "boss", PASSWORD).close()
        yield daemon
    finally:
        daemon.stop()
        drop_store(env)
        shutil.rmtree(base, ignore_errors=True)


@sqlite_only
def test_a_running_daemon_keeps_its_store_files_private(served):
    """REGRESSION: 2026-12-01 — while `salon serve` ran, salon.db, salon.db-wal and
    salon.db-shm were 0644 in a 0755 directory. Wanted: 0700 directory, 0600 files."""
    db = Path(served.env["AGENT_SALON_DB"])
    data = db.parent
    present = {p.name for p in data.iterdir()}
    assert {db.name, db.name + "-wal", db.name + "-shm"} <= present, present
    assert mode(data) == 0o700
    for path in data.iterdir():
        assert mode(path) & 0o077 == 0, f"{path.name} is {oct(mode(path))}"


def _probe_user() -> str:
    if subprocess.run(["id", "-u", PROBE_USER], capture_output=True).returncode != 0:
        made = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PROBE_USER],
            capture_output=True,
            text=True,
        )
        if made.returncode != 0:
            pytest.skip(f"cannot create a second user: {made.stderr.strip()}")
    return PROBE_USER


@sqlite_only
@pytest.mark.skipif(not ROOT or not shutil.which("runuser"), reason="needs root and runuser")
def test_another_local_user_cannot_read_the_store(served):
    """REGRESSION: 2026-12-01 — another uid read salon.db (django_session included) and
    replayed a staff cookie. Wanted: nothing of the store readable by another user."""
    user = _probe_user()
    db = Path(served.env["AGENT_SALON_DB"])
    paths = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), *secret_files(db.parent)]
    readable = []
    for path in paths:
        done = subprocess.run(
            ["runuser", "-u", user, "--", "head", "-c", "1", str(path)], capture_output=True
        )
        if done.returncode == 0:
            readable.append(path.name)
    listing = subprocess.run(
        ["runuser", "-u", user, "--", "ls", str(db.parent)], capture_output=True
    )
    assert readable == [], f"{user} can read {readable}"
    assert listing.returncode != 0, "another user can list the data directory"


def test_the_store_holds_no_session_that_could_open_the_admin(served):
    """REGRESSION: 2026-12-01 — the session_key of a row of django_session, sent as the
    `sessionid` cookie, opened the admin as that staff member. Wanted: what the store
    holds is useless as a cookie. Staff sessions are signed cookies now: after a staff
    login (the fixture's), the store holds no session at all, and a made-up cookie opens
    nothing."""
    tables = query_store(
        served.env,
        "SELECT name FROM sqlite_master WHERE name = 'django_session'"
        if not served.env.get("DATABASE_URL")
        else "SELECT tablename FROM pg_tables WHERE tablename = 'django_session'",
    )
    keys = query_store(served.env, "SELECT session_key FROM django_session") if tables else []
    assert keys == []
    with httpx.Client(base_url=served.url, cookies={"sessionid": "x" * 32}, timeout=30) as client:
        assert client.get("/admin/").status_code == 302  # to the login page
    staff = admin_client(served.url, "boss", PASSWORD)
    try:
        assert staff.get("/admin/").status_code == 200  # the signed cookie does open it
    finally:
        staff.close()


@sqlite_only
def test_serve_refuses_a_store_others_can_read(tmp_path):
    """REGRESSION: 2026-12-01 — `salon serve` started on a 0644 salon.db. Wanted: refused
    with one line naming the file, before listening."""
    env, _ = private_store(tmp_path)
    db = Path(env["AGENT_SALON_DB"])
    db.chmod(0o644)
    port = free_port()
    process = subprocess.Popen(
        salon_cmd("serve", "--port", str(port)),
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )

    def settled():
        if process.poll() is not None:
            return "exited"
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        state = wait_until(settled, timeout=30, interval=0.1)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert state == "exited", "salon serve started on a store others can read"
    assert process.returncode != 0
    assert str(db) in one_line(stderr)


@sqlite_only
def test_a_command_refuses_a_store_others_can_read(tmp_path):
    """REGRESSION: 2026-12-01 — every command ran on a 0644 salon.db. Wanted: refused with
    one line naming the file (exit status non-zero)."""
    env, _ = private_store(tmp_path)
    db = Path(env["AGENT_SALON_DB"])
    db.chmod(0o644)
    done = cli("rooms", env=env)
    assert done.returncode != 0, done.stdout
    assert str(db) in one_line(done.stderr)


# ---------------------------------------------------------------- finding 9: the secret


@sqlite_only
def test_a_secret_others_can_read_is_refused(tmp_path):
    """REGRESSION: 2026-12-01 — a 0644 secret file (e.g. in a shared directory, or written
    by another user) was used to sign and verify entries. Wanted: refused with one line
    naming the file."""
    env, data = private_store(tmp_path)
    (secret,) = secret_files(data)
    secret.chmod(0o644)
    done = cli("rooms", env=env)
    assert done.returncode != 0, done.stdout
    assert str(secret) in one_line(done.stderr)


@sqlite_only
@pytest.mark.skipif(not ROOT, reason="chown to another user needs root")
def test_a_secret_owned_by_another_user_is_refused(tmp_path):
    """REGRESSION: 2026-12-01 — a secret file owned by another uid (mode 0600) was used.
    Wanted: refused with one line naming the file."""
    env, data = private_store(tmp_path)
    (secret,) = secret_files(data)
    os.chown(secret, 65534, 65534)
    done = cli("rooms", env=env)
    assert done.returncode != 0, done.stdout
    assert str(secret) in one_line(done.stderr)


# ---------------------------------------------------------------- findings 4, 10, 16: install


@pytest.fixture
def project(tmp_path):
    """A project named like its agent, with personal settings of its own (the store is
    named by a variable, so install writes .claude/settings.local.json and the local MCP
    scope in ~/.claude.json, HOME being the test's own), on a migrated store."""
    (tmp_path / "home").mkdir()
    env = dict(private_env(tmp_path), HOME=str(tmp_path / "home"))
    env.pop("CLAUDE_CONFIG_DIR", None)
    path = tmp_path / "web-app"
    (path / ".claude").mkdir(parents=True)
    (path / ".claude" / "settings.local.json").write_text(json.dumps({"model": "opus"}, indent=2))
    yield env, path
    drop_store(env)


def install(env, path: Path, *args: str) -> subprocess.CompletedProcess:
    return cli("install", "team", *args, env=env, cwd=path, umask=UMASK)


def our_hooks(settings: dict) -> list[str]:
    return [
        hook.get("command", "")
        for groups in settings.get("hooks", {}).values()
        for group in groups
        for hook in group.get("hooks", [])
        if "salon" in hook.get("command", "")
    ]


def test_install_leaves_the_target_of_a_planted_temp_link_untouched(project, tmp_path):
    """REGRESSION: 2026-12-01 — a project holding `.claude/.settings.json.salon-tmp ->
    ~/.bashrc` got ~/.bashrc overwritten by `salon install` (it wrote the temporary file
    through the link, then renamed the link into place). Wanted: the link's target
    untouched; install writes a fresh exclusive temporary file and renames it."""
    env, path = project
    victims = {}
    for temporary in (
        path / ".claude" / ".settings.local.json.salon-tmp",
        tmp_path / "home" / "..claude.json.salon-tmp",
    ):
        victim = tmp_path / f"victim-{temporary.name}"
        victim.write_text("precious\n")
        temporary.symlink_to(victim)
        victims[victim] = "precious\n"
    done = install(env, path)
    assert done.returncode == 0, done.stderr
    for victim, text in victims.items():
        assert victim.read_text() == text, f"{victim.name} was overwritten"
    settings = path / ".claude" / "settings.local.json"
    assert not settings.is_symlink()
    assert our_hooks(json.loads(settings.read_text()))


def test_install_does_not_write_a_backup_through_a_planted_link(project, tmp_path):
    """REGRESSION: 2026-12-01 — the backup (`settings.json.bak-<time>`) was written with a
    plain open: a dangling symlink planted under the next minutes' backup names made
    install create or overwrite the link's target. Wanted: the backup written exclusively
    (never through a link), the planted targets never created. (Backups are now one
    `<file>.bak` per file: links are planted under that name too.)"""
    env, path = project
    claude = path / ".claude"
    now = datetime.now()
    targets = [tmp_path / "planted" / "target-bak"]
    (claude / "settings.local.json.bak").symlink_to(targets[0])
    for second in range(-5, 180):
        stamp = (now + timedelta(seconds=second)).strftime("%Y%m%d-%H%M%S")
        target = tmp_path / "planted" / f"target-{stamp}"
        targets.append(target)
        (claude / f"settings.local.json.bak-{stamp}").symlink_to(target)
    (tmp_path / "planted").mkdir()
    done = install(env, path)
    assert done.returncode == 0, done.stderr
    created = [t.name for t in targets if t.exists()]
    assert created == [], f"install wrote through planted links: {created}"


def test_install_keeps_the_mode_of_private_settings(project, tmp_path):
    """REGRESSION: 2026-12-01 — a 0600 .claude/settings.json (and .mcp.json) came out of
    `salon install` 0644, and so did their backups. Wanted: the mode kept, backups no
    looser than the file."""
    env, path = project
    settings = path / ".claude" / "settings.local.json"
    mcp = tmp_path / "home" / ".claude.json"  # the local MCP scope
    mcp.write_text(json.dumps({"mcpServers": {"other": {"type": "http", "url": "http://x"}}}))
    settings.chmod(0o600)
    mcp.chmod(0o600)
    before = {p for root in (path, mcp.parent) for p in root.rglob("*")}
    done = install(env, path)
    assert done.returncode == 0, done.stderr
    assert our_hooks(json.loads(settings.read_text()))
    assert oct(mode(settings)) == oct(0o600)
    assert oct(mode(mcp)) == oct(0o600)
    new = [
        p for root in (path, mcp.parent) for p in root.rglob("*") if p not in before and p.is_file()
    ]
    backups = [p for p in new if p.name.startswith(("settings.local.json", ".claude.json"))]
    assert backups, [p.name for p in new]
    for backup in backups:
        assert mode(backup) & 0o077 == 0, f"{backup.name} is {oct(mode(backup))}"


def _keys(pairs) -> Counter:
    """Every key path of a document read with strict_json (duplicates counted)."""
    found: Counter = Counter()

    def walk(value, prefix):
        if isinstance(value, list) and all(isinstance(p, tuple) for p in value):
            for key, inner in value:
                found[(*prefix, key)] += 1
                walk(inner, (*prefix, key))
        elif isinstance(value, list):
            for inner in value:
                walk(inner, (*prefix, "[]"))

    walk(pairs, ())
    return found


def _refused_naming_settings(done, settings: Path, before: str) -> bool:
    return (
        done.returncode != 0
        and "settings.local.json" in done.stderr
        and settings.read_text() == before
    )


def test_install_never_writes_invalid_json(project):
    """REGRESSION: 2026-12-01 — settings.json holding `1e400` was rewritten with `Infinity`
    (not JSON: Claude Code can no longer read the file). Wanted: such input refused with a
    message naming the file, or kept exact — never invalid JSON written."""
    env, path = project
    settings = path / ".claude" / "settings.local.json"
    before = '{"cleanupPeriodDays": 1e400, "model": "opus"}\n'
    settings.write_text(before)
    done = install(env, path)
    if _refused_naming_settings(done, settings, before):
        return
    assert done.returncode == 0, done.stderr
    strict_json(settings.read_text())


def test_install_never_silently_drops_a_duplicate_key(project):
    """REGRESSION: 2026-12-01 — settings.json with `"env"` twice came back with only the
    second (the first one's variables silently gone). Wanted: refused with a message
    naming the file, or every key kept."""
    env, path = project
    settings = path / ".claude" / "settings.local.json"
    before = '{"env": {"A": "1"}, "env": {"B": "2"}, "model": "opus"}\n'
    settings.write_text(before)
    done = install(env, path)
    if _refused_naming_settings(done, settings, before):
        return
    assert done.returncode == 0, done.stderr
    kept, written = _keys(strict_json(before)), _keys(strict_json(settings.read_text()))
    assert kept <= written, f"dropped: {kept - written}"


def test_install_keeps_a_symlinked_settings_file_a_symlink(project, tmp_path):
    """REGRESSION: 2026-12-01 — a .claude/settings.json that is a symlink (settings shared
    between checkouts) was replaced by a regular file. Wanted: it stays a symlink (the
    target updated), or install refuses with a message naming it and changes nothing."""
    env, path = project
    shared = tmp_path / "shared-settings.json"
    before = json.dumps({"model": "opus"}, indent=2)
    shared.write_text(before)
    settings = path / ".claude" / "settings.local.json"
    settings.unlink()
    settings.symlink_to(shared)
    done = install(env, path)
    assert settings.is_symlink(), "settings.json is no longer a symlink"
    if done.returncode != 0:
        assert "settings.local.json" in done.stderr and shared.read_text() == before
    else:
        assert our_hooks(json.loads(shared.read_text()))


# ---------------------------------------------------------------- finding 17: the hook log


def hook_log_lines(base: Path) -> list[str]:
    return [
        line
        for log in sorted(base.rglob("agent-salon-hooks.log*"))
        for line in log.read_text(errors="replace").splitlines()
    ]


FORGED = "1999-01-01T00:00:00.000+00:00 salon hook stop: FORGED LINE"


def test_hook_input_cannot_forge_a_line_in_the_hook_log(tmp_path):
    """REGRESSION: 2026-12-01 — a Stop hook whose input `cwd` held `\\n<timestamp> salon
    hook stop: FORGED LINE` wrote that as a line of its own into agent-salon-hooks.log.
    Wanted: control characters escaped (and values clipped) in every log line."""
    env = private_env(tmp_path, AGENT_SALON_HEADLESS="0")
    cwd = str(tmp_path / "proj") + "\n" + FORGED
    done = run_hook(env, "stop", hook_payload("stop", claude_session_id(), cwd))
    assert (done.returncode, done.stdout) == (0, b"")
    lines = hook_log_lines(tmp_path)
    assert any("salon hook stop" in line for line in lines), "nothing was logged"
    assert not [line for line in lines if line.startswith(FORGED[:20])], lines


def test_a_huge_hook_input_value_is_clipped_in_the_hook_log(tmp_path):
    """REGRESSION: 2026-12-01 — a 100,000-character `cwd` was written whole into the hook
    log line. Wanted: values clipped (each line a few KiB at most)."""
    env = private_env(tmp_path, AGENT_SALON_HEADLESS="0")
    cwd = "/tmp/" + "c" * 100_000
    done = run_hook(env, "stop", hook_payload("stop", claude_session_id(), cwd))
    assert (done.returncode, done.stdout) == (0, b"")
    lines = hook_log_lines(tmp_path)
    assert lines, "nothing was logged"
    assert max(map(len, lines)) <= 4096, f"a hook log line of {max(map(len, lines))} characters"


def planted_runtime_dir(tmp: Path) -> Path:
    """`<TMPDIR>/agent-salon-<uid>` as another local user makes it first: theirs, open to
    all (as root the test hands it to `nobody`; otherwise only its mode betrays it)."""
    runtime = tmp / f"agent-salon-{os.getuid()}"
    shutil.rmtree(runtime, ignore_errors=True)
    runtime.mkdir()
    runtime.chmod(0o777)
    if ROOT:
        os.chown(runtime, 65534, 65534)
    return runtime


def test_the_hooks_write_nothing_through_links_planted_in_the_temp_directory(tmp_path):
    """REGRESSION: 2026-12-03 — another local user made `$TMPDIR/agent-salon-<uid>` and put
    links in it by the names of the hook log and a `beat-*` stamp: a root hook appended to
    and created files of their choosing. Wanted: nothing written through the links; the
    hooks still exit 0 and stay silent."""
    env = private_env(tmp_path, AGENT_SALON_HEADLESS="0")
    tmp, project = tmp_path / "tmp", tmp_path / "proj"
    project.mkdir()
    session = claude_session_id()
    beat = hook_payload("heartbeat", session, str(project))
    started = run_hook(env, "session-start", hook_payload("session-start", session, str(project)))
    assert started.returncode == 0, started.stderr
    assert run_hook(env, "heartbeat", beat).returncode == 0
    runtime = tmp / f"agent-salon-{os.getuid()}"
    [stamp] = [p.name for p in runtime.iterdir() if p.name.startswith("beat-")]

    planted = planted_runtime_dir(tmp)
    victim_log = tmp_path / "victim.log"
    victim_log.write_text("mine\n")
    victim_new = tmp_path / "victim-made"
    (planted / "agent-salon-hooks.log").symlink_to(victim_log)
    (planted / stamp).symlink_to(victim_new)

    assert run_hook(env, "heartbeat", beat).returncode == 0  # writes the stamp
    # No data directory it can name (a relative store): the log goes to the temp one.
    broken = run_hook({**env, "AGENT_SALON_DB": "relative.db"}, "stop", "not json")
    assert (broken.returncode, broken.stdout) == (0, b"")
    assert victim_log.read_text() == "mine\n"
    assert not victim_new.exists() and not victim_new.is_symlink()


def test_the_hook_log_is_private_wherever_it_lives(tmp_path):
    """REGRESSION: 2026-12-03 — the hook log in a data directory of mode 0755 was 0644,
    readable by every local user, and its lines carry session ids. Wanted: 0600, an
    existing log made 0600 on its next line."""
    old = os.umask(UMASK)
    try:
        env = private_env(tmp_path)
    finally:
        os.umask(old)
    data = Path(env["AGENT_SALON_DB"]).parent
    data.chmod(0o755)
    log = data / "agent-salon-hooks.log"
    log.write_text("")
    log.chmod(0o644)
    done = subprocess.run(
        salon_cmd("hook", "stop"),
        env=env,
        input=b"not json",
        capture_output=True,
        timeout=60,
        preexec_fn=lambda: os.umask(UMASK),
    )
    assert (done.returncode, done.stdout) == (0, b"")
    assert "salon hook" in log.read_text()
    assert mode(log) == 0o600
    log.unlink()
    assert run_hook(env, "stop", "not json").returncode == 0
    assert mode(log) == 0o600


# ---------------------------------------------------------------- finding 12: the bind warning


def served_output(env: dict[str, str], base: Path, *args: str) -> str:
    """Start a server command, wait for /healthz, stop it: everything it printed."""
    port = free_port()
    log = base / f"out-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            salon_cmd(*[a.replace("PORT", str(port)) for a in args]),
            env=env,
            cwd=base,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def up():
            if process.poll() is not None:
                return True
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            assert wait_until(up, timeout=60, interval=0.1), "the server never answered"
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
    return log.read_text(errors="replace")


def warns_about_tokens(output: str) -> bool:
    return any(
        "warning" in line.lower() and "token" in line.lower() for line in output.splitlines()
    )


def test_serve_on_all_interfaces_with_no_token_warns(tmp_path):
    """What finding 12 extends: the warning appears today with no token row at all."""
    env = private_env(tmp_path, AGENT_SALON_BIND="0.0.0.0")
    try:
        assert warns_about_tokens(served_output(env, tmp_path, "serve", "--port", "PORT"))
    finally:
        drop_store(env)


def test_a_revoked_token_does_not_silence_the_open_bind_warning(tmp_path):
    """REGRESSION: 2026-12-01 — after `salon token issue x; salon token revoke x`, `salon
    serve` on 0.0.0.0 printed no warning (it only asked whether any token row existed).
    Wanted: a revoked token protects nobody; the warning stays."""
    env = private_env(tmp_path, AGENT_SALON_BIND="0.0.0.0")
    try:
        assert cli("token", "issue", "x", env=env).returncode == 0
        assert cli("token", "revoke", "x", env=env).returncode == 0
        assert warns_about_tokens(served_output(env, tmp_path, "serve", "--port", "PORT"))
    finally:
        drop_store(env)


def test_one_active_token_does_not_silence_the_warning_while_other_labels_can_write(tmp_path):
    """With a token for `acme` only, `web-app` and any new label still write with none:
    serve on all interfaces warns and names the open label; requiring tokens silences it."""
    env = private_env(tmp_path, AGENT_SALON_BIND="0.0.0.0")
    try:
        assert cli("token", "issue", "acme", env=env).returncode == 0
        assert cli("send", "salon", "FACT", "hello", env=env, agent="web-app").returncode == 0
        output = served_output(env, tmp_path, "serve", "--port", "PORT")
        warnings = [line for line in output.splitlines() if "WARNING" in line]
        assert warnings, output[-2000:]
        assert "web-app" in warnings[0] and "any new label" in warnings[0]
        assert "acme" not in warnings[0]

        strict_env = {**env, "AGENT_SALON_REQUIRE_TOKENS": "1"}
        output = served_output(strict_env, tmp_path, "serve", "--port", "PORT")
        assert "listening" in output and "WARNING" not in output, output[-2000:]
    finally:
        drop_store(env)


def test_runserver_on_all_interfaces_warns_like_serve(tmp_path):
    """REGRESSION: 2026-12-01 — `salon runserver 0.0.0.0:PORT` served everything to the
    network with no tokens issued and printed no warning. Wanted: the same warning as
    `salon serve`."""
    env = private_env(tmp_path)
    try:
        output = served_output(env, tmp_path, "runserver", "0.0.0.0:PORT", "--noreload")
        assert warns_about_tokens(output), output[-2000:]
    finally:
        drop_store(env)


# ---------------------------------------------------------------- finding 15: salon mcp's input


def _stdio(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        salon_cmd("mcp"),
        env={
            **env,
            "AGENT_SALON_NAME": unique("stdio"),
            "CLAUDE_CODE_SESSION_ID": claude_session_id(),
        },
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def _line(process: subprocess.Popen, message: dict) -> None:
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def _peak_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def _overlong_line(tmp_path, size: int) -> tuple[list[dict], int]:
    """Feed `salon mcp` one line of `size` bytes, then a ping: its answers, and how much
    its peak memory grew (KiB) while reading the line."""
    env = private_env(tmp_path)
    process = _stdio(env)
    try:
        _line(process, INITIALIZE)
        assert json.loads(process.stdout.readline())["id"] == 1
        # `initialize` is answered before Django loads: measure once the full server
        # has answered a request of its own.
        _line(process, {"jsonrpc": "2.0", "id": 0, "method": "tools/list"})
        assert json.loads(process.stdout.readline())["id"] == 0
        before = _peak_kib(process.pid)
        chunk = b"x" * (1 << 20)
        for _ in range(size >> 20):
            process.stdin.write(chunk)
        process.stdin.write(b"\n")
        _line(process, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
        answers = []
        while not answers or answers[-1].get("id") != 2:
            answers.append(json.loads(process.stdout.readline()))
        return answers, _peak_kib(process.pid) - before
    finally:
        process.kill()
        process.wait(10)
        drop_store(env)


def test_salon_mcp_answers_an_overlong_line_with_an_error_and_keeps_serving(tmp_path):
    """Half of finding 15's stdio part holds today: a 5 MiB line gets an error, then the
    next request its answer."""
    answers, _ = _overlong_line(tmp_path, 5 << 20)
    assert "error" in answers[0] and answers[-1] == {"jsonrpc": "2.0", "id": 2, "result": {}}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_salon_mcp_does_not_buffer_an_overlong_line_whole(tmp_path):
    """REGRESSION: 2026-12-01 — `salon mcp` read each stdin line whole before looking at its
    length: a 64 MiB line raised its peak memory by ~130 MiB (a line with no end would
    take all memory). Wanted: a line over 4 MiB answered with an error and skipped
    without being held whole (peak growth well under the line's size)."""
    answers, grown_kib = _overlong_line(tmp_path, 64 << 20)
    assert "error" in answers[0] and answers[-1]["id"] == 2
    assert grown_kib < 32 * 1024, f"peak memory grew by {grown_kib // 1024} MiB"
