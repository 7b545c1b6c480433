"""relay.runner: a policy's serve command, really run — scripts in a real project
directory that hang, flood, print their environment, read stdin, fail, or lead out of
the project.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from relay import runner

ASKER = "consumer-b#3f9c1a20"
SERVER = {
    "PATH": os.environ["PATH"],
    "HOME": "/home/server",
    "LANG": "C.UTF-8",
    "AGENT_SALON_SECRET": "the-store-secret",
    "DATABASE_URL": "postgres://salon:password@db/salon",
}


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    return root


def script(root: Path, name: str, body: str) -> str:
    path = root / "scripts" / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return f"scripts/{name}"


def serve(root: Path, *argv: str, timeout: float = 10, key: str = "status:db"):
    return runner.serve(argv, root=str(root), key=key, asker=ASKER, timeout=timeout, environ=SERVER)


def gone(pid: int, within: float = 10) -> bool:
    """The process has ended (a zombie no one has reaped yet counts as ended)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.01)
    return False


def test_the_answer_is_the_commands_stdout_run_in_the_project_root(project):
    program = script(project, "status.sh", 'echo "status of $1: ok"\npwd\n')
    served = serve(project, program, "db")
    assert served.status == runner.OK and served.ok
    assert served.output == f"status of db: ok\n{project}\n"
    assert served.reason == ""


def test_no_shell_runs_the_arguments_reach_the_program_as_written(project):
    served = serve(project, "printf", "%s|", "$(id)", "`id`", "a;b", "*")
    assert served.output == "$(id)|`id`|a;b|*|"


def test_the_command_sees_only_the_five_variables(project):
    served = serve(project, "env", key="port:staging")
    variables = dict(line.split("=", 1) for line in served.output.splitlines())
    assert variables == {
        "PATH": SERVER["PATH"],
        "HOME": "/home/server",
        "LANG": "C.UTF-8",
        "AGENT_SALON_ASK": "port:staging",
        "AGENT_SALON_ASKER": ASKER,
    }


def test_a_script_printing_its_environment_finds_no_secret_of_the_server(project):
    served = serve(project, script(project, "env.sh", "env\n"))
    assert served.ok
    assert "the-store-secret" not in served.output and "DATABASE_URL" not in served.output
    names = {line.split("=", 1)[0] for line in served.output.splitlines()}
    # the shell adds its own PWD (and may add SHLVL, _); nothing of the server's
    assert names - {"PWD", "SHLVL", "_"} == {
        "PATH", "HOME", "LANG", "AGENT_SALON_ASK", "AGENT_SALON_ASKER",
    }  # fmt: skip


def test_a_command_reading_stdin_finds_it_empty_not_the_servers(project):
    """The server's own stdin holds a line; the command reads end of file."""
    program = script(
        project,
        "reads.sh",
        'if read -r line; then echo "read: $line"; else echo "stdin is empty"; fi\n',
    )
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    try:
        os.write(write_end, b"what the server was given\n")
        os.dup2(read_end, 0)
        served = serve(project, program)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert served.output == "stdin is empty\n"


def test_a_hanging_command_times_out_and_everything_it_started_is_killed(project):
    program = script(project, "hangs.sh", "sleep 300 &\necho $! > child.pid\nsleep 300\n")
    started = time.monotonic()
    served = serve(project, program, timeout=1)
    assert served.status == runner.TIMED_OUT and not served.ok
    assert served.reason == "the command did not finish within 1 s"
    assert served.output == ""
    assert 1 <= served.seconds < 5 and time.monotonic() - started < 5
    assert gone(int((project / "child.pid").read_text()))


def test_a_command_that_closes_stdout_and_lingers_times_out_too(project):
    program = script(project, "lingers.sh", "echo early\nexec >&-\nsleep 300\n")
    served = serve(project, program, timeout=1)
    assert served.status == runner.TIMED_OUT and served.output == ""


def test_a_flood_of_output_is_cut_at_the_cap_and_the_command_killed(project):
    program = script(project, "floods.sh", "echo $$ > flood.pid\nexec yes 'all the data'\n")
    started = time.monotonic()
    served = serve(project, program)
    assert served.status == runner.FAILED
    assert served.reason == "the command printed more than 16384 bytes"
    assert served.output == "", "a flood releases nothing"
    assert time.monotonic() - started < 5
    assert gone(int((project / "flood.pid").read_text()))


def test_output_of_exactly_the_cap_is_the_answer(project):
    program = script(project, "full.sh", f"head -c {16 * 1024} /dev/zero | tr '\\0' x\n")
    served = serve(project, program)
    assert served.ok and served.output == "x" * 16 * 1024


def test_a_failing_command_releases_nothing_it_printed(project):
    program = script(project, "fails.sh", "echo the secret answer\nexit 3\n")
    served = serve(project, program)
    assert served == (runner.FAILED, "", "the command exited with status 3", served.seconds)


def test_a_command_killed_by_a_signal_fails_naming_it(project):
    served = serve(project, script(project, "dies.sh", "echo half\nkill -9 $$\n"))
    assert (served.status, served.output) == (runner.FAILED, "")
    assert served.reason == "the command was ended by signal SIGKILL"


def test_a_command_that_prints_nothing_fails(project):
    served = serve(project, script(project, "quiet.sh", "echo '  '\n"))
    assert (served.status, served.reason) == (runner.FAILED, "the command printed nothing")


def test_bytes_that_are_not_text_read_as_replacement_characters(project):
    served = serve(project, script(project, "bytes.sh", "printf 'a\\377b\\000c'\n"))
    assert served.ok and served.output == "a\ufffdb\ufffdc"


@pytest.mark.parametrize("program", ["../outside.sh", "scripts/../../outside.sh"])
def test_a_program_climbing_out_of_the_project_never_starts(project, program):
    outside = project.parent / "outside.sh"
    outside.write_text(f"#!/bin/sh\ntouch {project.parent}/ran\necho escaped\n")
    outside.chmod(0o755)
    served = serve(project, program)
    assert served.status == runner.FAILED and served.output == ""
    assert 'climbs out of the project with ".."' in served.reason
    assert not (project.parent / "ran").exists()


def test_a_link_inside_the_project_that_leads_out_never_starts(project):
    outside = project.parent / "outside.sh"
    outside.write_text(f"#!/bin/sh\ntouch {project.parent}/ran\necho escaped\n")
    outside.chmod(0o755)
    (project / "scripts" / "status.sh").symlink_to(outside)
    served = serve(project, "scripts/status.sh")
    assert served.status == runner.FAILED
    assert served.reason.startswith('the serve program "scripts/status.sh" leads outside the')
    assert not (project.parent / "ran").exists()


def test_an_absolute_program_never_starts(project):
    served = serve(project, "/bin/echo", "hi")
    assert served.status == runner.FAILED and "is an absolute path" in served.reason


def test_a_missing_or_not_executable_program_fails_naming_it(project):
    missing = serve(project, "scripts/missing.sh")
    assert missing.reason.startswith('the serve program "scripts/missing.sh" does not exist')
    (project / "scripts" / "plain.sh").write_text("#!/bin/sh\necho hi\n")
    plain = serve(project, "scripts/plain.sh")
    assert plain.reason == (
        'the serve program "scripts/plain.sh" is not executable: chmod +x scripts/plain.sh'
    )
    unknown = serve(project, "no-such-command-here")
    assert unknown.reason.startswith('the serve program "no-such-command-here" is not on PATH')


def test_the_serve_timeout_is_a_known_setting_of_10_seconds():
    from salon.config import KNOWN, ConfigError, read

    assert KNOWN["AGENT_SALON_SERVE_TIMEOUT"] == "10"
    assert read({}).serve_timeout == 10
    assert read({"AGENT_SALON_SERVE_TIMEOUT": "3"}).serve_timeout == 3
    with pytest.raises(ConfigError, match="AGENT_SALON_SERVE_TIMEOUT"):
        read({"AGENT_SALON_SERVE_TIMEOUT": "0"})


def test_a_bare_name_is_looked_up_on_the_absolute_entries_of_path_only(project, monkeypatch):
    """A "." in the server's PATH would find a program in whatever directory it runs in."""
    planted = project / "planted-probe"
    planted.write_text("#!/bin/sh\necho planted\n")
    planted.chmod(0o755)
    monkeypatch.chdir(project)
    served = runner.serve(
        ["planted-probe"],
        root=str(project),
        key="status:db",
        asker=ASKER,
        timeout=10,
        environ=dict(SERVER, PATH=f".:{SERVER['PATH']}"),
    )
    assert served.status == runner.FAILED and served.output == ""
    assert served.reason.startswith('the serve program "planted-probe" is not on PATH')
