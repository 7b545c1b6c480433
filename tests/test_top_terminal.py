"""`salon top` in a real terminal: tmux at 80x24 running a shell, `salon top` typed into
it, entries sent by other real processes (a `salon send`, a running daemon's webhook),
and the terminal as the shell finds it after `q`, Ctrl-C and a crash. Also: a session
of keys writes nothing, and the commands and hooks that run on every turn never load
the terminal library."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.claude_kit import WEB_SESSION, hook, send, web
from tests.live_kit import seed
from tests.support import (
    REPO,
    Daemon,
    drop_store,
    dump_store,
    migrate,
    run_salon,
    salon_env,
    stretched,
)

pytestmark = pytest.mark.slow

PROMPT = "ready$ "
SHOWN = PROMPT.strip()  # capture-pane leaves out trailing spaces
# What the terminal says of its modes: the normal screen, the cursor shown, no mouse.
RESTORED = "alt=0 cursor=1 mouse=0"
MODES = "alt=#{alternate_on} cursor=#{cursor_flag} mouse=#{mouse_any_flag}"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    data = tmp_path_factory.mktemp("top")
    short = tempfile.mkdtemp(prefix="st-", dir="/tmp")
    environment = salon_env(data, TMPDIR=short)
    migrate(environment)
    seed(environment, data)
    yield environment
    drop_store(environment)
    shutil.rmtree(short, ignore_errors=True)


class Terminal:
    """A shell in a tmux session of its own, 80x24 unless told."""

    def __init__(self, env: dict[str, str], cwd: Path, width: int = 80, height: int = 24):
        self.cwd = cwd
        self.scratch = Path(tempfile.mkdtemp(prefix="tm-", dir="/tmp"))
        self.socket = self.scratch / "tmux.sock"
        self.name = "top"
        environment = {**env, "PS1": PROMPT, "TERM": "xterm-256color", "HOME": str(cwd)}
        line = " ".join(
            [
                "env",
                "-i",
                *(f"{k}={shlex.quote(v)}" for k, v in environment.items()),
                "bash",
                "--norc",
                "--noprofile",
            ]
        )
        done = self.tmux(
            "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
            "-c", str(cwd), line,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        try:
            self.wait_for(SHOWN)
        except AssertionError:
            self.stop()
            raise

    def tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, timeout=10
        )

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.name, "-l", text)
        self.tmux("send-keys", "-t", self.name, "Enter")

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", self.name, key)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name).stdout

    def modes(self) -> str:
        return self.tmux("display-message", "-p", "-t", self.name, MODES).stdout.strip()

    def size(self) -> str:
        size = "#{pane_width}x#{pane_height}"
        return self.tmux("display-message", "-p", "-t", self.name, size).stdout.strip()

    def wait_for(self, text: str, seconds: float = 60) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.02)
        raise AssertionError(f"{text!r} not on screen after {seconds}s:\n{self.screen()}")

    def stop(self) -> None:
        self.tmux("kill-server")
        shutil.rmtree(self.scratch, ignore_errors=True)


@pytest.fixture
def terminal(store, tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    shell = Terminal(store, tmp_path)
    yield shell
    shell.stop()


def top_command(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in (sys.executable, "-m", "salon.cli", "top", *args))


def start_top(terminal: Terminal, *args: str) -> str:
    """`salon top` typed into the shell (the shell's terminal modes kept in a file
    first); the screen once its flow is drawn."""
    terminal.type("stty -g > modes.before; clear; echo before-top")
    terminal.wait_for("before-top\n" + SHOWN)
    terminal.type(top_command(*args))
    terminal.wait_for("flow: all")
    return terminal.wait_for("seats of ")


def back_at_the_prompt(terminal: Terminal, seconds: float = 30) -> str:
    """The screen once the shell's prompt is its last line again."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        screen = terminal.screen()
        if screen.rstrip().endswith(SHOWN) and "alt=0" in terminal.modes():
            return screen
        time.sleep(0.02)
    raise AssertionError(f"no prompt after {seconds}s:\n{terminal.screen()}")


def after_exit(terminal: Terminal) -> str:
    """What the shell says after `salon top` ended: its exit status, and whether the
    terminal's modes are the ones it had before. (Each word the shell prints is typed
    split in two, so that the typed line never matches it.)"""
    back_at_the_prompt(terminal)
    terminal.type(
        'echo "ex""it=$?"; stty -g | cmp -s - modes.before && echo "modes-re""stored"; '
        'echo "sa""id"'
    )
    return terminal.wait_for("\nsaid\n", 30)


def gone(terminal: Terminal, text: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while text in terminal.screen():
        assert time.monotonic() < deadline, f"{text!r} still on screen:\n{terminal.screen()}"
        time.sleep(0.02)


def seen_within(terminal: Terminal, text: str, seconds: float) -> float:
    start = time.monotonic()
    terminal.wait_for(text, 30)
    return time.monotonic() - start


# ---------------------------------------------------------------- the real terminal


def test_top_at_80x24_shows_a_new_entry_within_a_second_and_q_exits_0_restoring_the_terminal(
    store, terminal
):
    screen = start_top(terminal)
    assert terminal.size() == "80x24"
    assert "rooms" in screen and "seats of team" in screen and "flow: all" in screen
    assert "Who owns the session-cookie refresh?" in screen
    assert terminal.modes().startswith("alt=1")  # the full screen is on

    word = f"marker-{uuid.uuid4().hex[:8]}"
    send(store, web, "team", "QUESTION", f"{word} is the deploy done?", "--to", "api-service")
    took = seen_within(terminal, f"{word} is the deploy done?", 30)
    screen = terminal.screen()
    assert "team QUESTION web-app#3f9c1a20 → api-service  wakes api-service#c4e1" in screen
    assert took < stretched(1.0), f"on screen {took:.2f}s after `salon send` returned"

    terminal.keys("q")
    shell = after_exit(terminal)
    assert "exit=0" in shell and "modes-restored" in shell
    assert "before-top" in shell  # the shell's own screen is back
    assert "flow: all" not in shell
    assert terminal.modes() == RESTORED


def test_top_sees_what_a_running_daemon_stores_within_a_second(store, terminal, tmp_path):
    daemon = Daemon(env=store, cwd=tmp_path).start()
    try:
        start_top(terminal)
        word = f"nightly-{uuid.uuid4().hex[:8]}"
        posted = httpx.post(
            daemon.url + "/notify?label=ci",
            json={"content": f"{word} build is red", "room": "team", "type": "FACT"},
            timeout=10,
        )
        assert posted.status_code == 202, posted.text
        assert seen_within(terminal, f"{word} build is red", 30) < stretched(1.0)
        assert "team FACT ci → *" in terminal.screen()
        terminal.keys("q")
        assert "exit=0" in after_exit(terminal)
    finally:
        daemon.stop()


def test_ctrl_c_ends_top_with_130_and_the_terminal_restored(store, terminal):
    start_top(terminal)
    terminal.keys("C-c")
    shell = after_exit(terminal)
    assert "exit=130" in shell and "modes-restored" in shell
    assert terminal.modes() == RESTORED


def test_a_sigterm_from_outside_ends_top_as_ctrl_c_does(store, terminal):
    start_top(terminal)
    shell_pid = terminal.tmux("display-message", "-p", "-t", "top", "#{pane_pid}").stdout
    (top_pid,) = subprocess.run(
        ["pgrep", "-P", shell_pid.strip()], capture_output=True, text=True, timeout=10
    ).stdout.split()
    os.kill(int(top_pid), signal.SIGTERM)
    shell = after_exit(terminal)
    assert "exit=130" in shell and "modes-restored" in shell
    assert terminal.modes() == RESTORED


def test_a_crash_inside_top_restores_the_terminal_and_says_what_failed(store, terminal):
    """A failure while drawing (here the rooms and seats failing on their second read,
    as a bug would) ends the view with its report and status 1, the terminal as it was."""
    crash = (
        "import os, sys\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'salon.settings')\n"
        "from salon import config, store\n"
        "store.prepare(config.merged_environment())\n"
        "import django\n"
        "django.setup()\n"
        "from salon.top import view\n"
        "reads = []\n"
        "real = view.snapshot\n"
        "def failing(*args):\n"
        "    reads.append(1)\n"
        "    if len(reads) > 1: raise RuntimeError('a bug in drawing the panes')\n"
        "    return real(*args)\n"
        "view.snapshot = failing\n"
        "from salon.cli import main\n"
        "sys.exit(main(['top']))\n"
    )
    (Path(terminal.scratch) / "crash.py").write_text(crash)
    terminal.type("stty -g > modes.before; clear; echo before-top")
    terminal.wait_for("before-top\n" + SHOWN)
    terminal.type(f"{shlex.quote(sys.executable)} {terminal.scratch}/crash.py 2> crash.err")
    report = terminal.cwd / "crash.err"
    deadline = time.monotonic() + 60  # the panes are read again within a few seconds
    while "RuntimeError" not in (report.read_text() if report.exists() else ""):
        assert time.monotonic() < deadline, terminal.screen()
        time.sleep(0.05)
    shell = after_exit(terminal)
    assert "exit=1" in shell and "modes-restored" in shell
    assert terminal.modes() == RESTORED
    terminal.type("grep -q 'RuntimeError: a bug in drawing the panes' crash.err && echo re''ported")
    assert terminal.wait_for("\nreported\n")


def test_a_session_of_keys_leaves_every_row_of_the_store_unchanged(store, terminal):
    before = dump_store(store)
    start_top(terminal)
    # Each step's keys, then what the screen shows once they are taken (and what it no
    # longer shows): Escape is sent alone, as a terminal reads Escape and a key at once
    # as Alt and that key.
    for keys, shows, not_shown in (
        (["Tab", "j", "k", "End", "Home"], "seats of ops", ""),  # the rooms: another room
        (["End", "Tab", "j", "PgDn", "PgUp", "Tab"], "seats of team", ""),  # seats; the flow
        (["k", "Enter"], "signature  valid", ""),  # an entry in full, its signature checked
        (["Escape"], "flow: all", "signature"),
        (["?"], "this help", ""),
        (["Escape"], "flow: all", "this help"),
        (["f", "f"], "flow: QUESTION", ""),
        (["f", "f", "f", "f"], "flow: all", ""),  # every filter, and back
        (["/"], "search the flow", ""),
        (["staging", "Enter"], "search 'staging'", ""),
        (["/"], "staging", ""),
        (["Escape"], "flow: all ·", "search 'staging'"),
        (["End"], "following", ""),
    ):
        terminal.keys(*keys)
        terminal.wait_for(shows, 30)
        if not_shown:
            gone(terminal, not_shown)
    terminal.keys("q")
    assert "exit=0" in after_exit(terminal)
    assert dump_store(store) == before


# ---------------------------------------------------------------- without a terminal


def test_top_without_a_terminal_says_to_use_watch_in_one_line(store):
    done = run_salon("top", env=store)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "salon top: needs a terminal (for a pipe or a log, `salon watch` prints the flow as "
        "lines)\n"
    )


def test_top_of_an_unknown_room_is_refused_in_one_line(store, terminal):
    terminal.type(top_command("tema") + '; echo "ex""it=$?"')
    screen = terminal.wait_for("\nexit=")
    assert "salon top: there is no room 'tema' (rooms: " in screen
    assert "exit=1" in screen and "Traceback" not in screen


def imported(stderr: str) -> set[str]:
    """The top-level modules a process run with PYTHONPROFILEIMPORTTIME=1 imported."""
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_send_and_the_hooks_never_load_the_terminal_library(store, tmp_path):
    """Without a server they load Django and answer themselves: still no Textual (nor
    Rich, which it draws with)."""
    profiled = {**store, "PYTHONPROFILEIMPORTTIME": "1", "PYTHONPATH": str(REPO)}
    runs = {
        "send": web(profiled, "send", "team", "FACT", "profiled"),
        "session-start": hook(profiled, "session-start", WEB_SESSION, tmp_path),
        "heartbeat": hook(profiled, "heartbeat", WEB_SESSION, tmp_path),
        "stop": hook(profiled, "stop", WEB_SESSION, tmp_path),
        "help": run_salon("help", env=profiled),
    }
    for name, run in runs.items():
        modules = imported(run.stderr)
        assert run.returncode == 0, (name, run.stderr[-2000:])
        assert "salon" in modules, name  # the profile is really there
        assert not modules & {"textual", "rich"}, name
