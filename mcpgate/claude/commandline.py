"""The command lines agent-salon writes into Claude Code's configuration and context.

Standard library only, and paths as strings (pathlib brings urllib.parse and ipaddress,
~4 ms): hooks print these on every session start.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

SESSION_VARIABLE = "CLAUDE_CODE_SESSION_ID"

# The order in which variables are written into a command line (stable, so a re-run of
# `salon install` writes byte-identical files).
ENV_ORDER = (
    "AGENT_SALON_CONFIG",
    "AGENT_SALON_DB",
    "DATABASE_URL",
    "REDIS_URL",
    "PYTHONPATH",
    "AGENT_SALON_NAME",
    "AGENT_SALON_ROOM",
    SESSION_VARIABLE,
)


def salon_argv(*args: str, python: str | None = None) -> list[str]:
    """`python -m salon.cli ARGS`, python being the interpreter running agent-salon now
    unless given, by its absolute path (never resolved: a virtualenv's python is a
    symlink whose target would lose the virtualenv)."""
    return [python or os.path.abspath(sys.executable), "-m", "salon.cli", *args]


def salon_on_path(environ: dict[str, str] | None = None) -> bool:
    """`salon` on PATH is this installation's (its script starts this interpreter), so a
    command written as plain `salon …` runs the same code on any machine set up the same
    way."""
    import shutil

    environ = os.environ if environ is None else environ
    found = shutil.which("salon", path=environ.get("PATH"))
    if not found:
        return False
    try:
        with open(os.path.realpath(found), "rb") as script:
            first = script.readline(4096)
    except OSError:
        return False
    if not first.startswith(b"#!"):
        return False
    interpreter = first[2:].strip().split(b" ")[0].decode(errors="replace")
    return os.path.realpath(interpreter) == os.path.realpath(sys.executable)


def pythonpath_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """PYTHONPATH=<checkout> when this process found agent-salon through PYTHONPATH (a
    source checkout that is not pip-installed): the commands would not find it otherwise."""
    environ = os.environ if environ is None else environ
    # The checkout: mcpgate/claude/ is two below it.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    for entry in environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and _resolved(entry) == root:
            return {"PYTHONPATH": root}
    return {}


def _resolved(path: Path | str) -> str:
    """The absolute path with ~ and symlinks resolved, as Path(path).expanduser().resolve()."""
    return os.path.realpath(os.path.expanduser(path))


def store_env(
    *,
    database_url: str,
    redis_url: str,
    db_path: Path | str,
    environ: dict[str, str] | None = None,
) -> dict[str, str]:
    """The variables that name this store, for a command run by Claude Code elsewhere.

    AGENT_SALON_CONFIG (absolute) when one is in use, and then only the store variables
    set in the environment itself (a password kept in the config file stays there);
    else DATABASE_URL / REDIS_URL. Always the absolute AGENT_SALON_DB: even with
    DATABASE_URL it names the data directory, where the generated secret that signs and
    verifies entries lives (a command started elsewhere would otherwise look for it in
    its own working directory). AGENT_SALON_SECRET is never written into a command line.
    """
    environ = os.environ if environ is None else environ
    env: dict[str, str] = {}
    config = environ.get("AGENT_SALON_CONFIG", "").strip()
    if config:
        env["AGENT_SALON_CONFIG"] = _resolved(config)
    env["AGENT_SALON_DB"] = _resolved(db_path)
    if database_url and (not config or environ.get("DATABASE_URL")):
        env["DATABASE_URL"] = database_url
    if redis_url and (not config or environ.get("REDIS_URL")):
        env["REDIS_URL"] = redis_url
    return env


def ordered(env: dict[str, str]) -> list[tuple[str, str]]:
    rank = {name: i for i, name in enumerate(ENV_ORDER)}
    return sorted(env.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))


def shell_command(env: dict[str, str], argv: list[str]) -> str:
    """`VAR=value … argv` for a POSIX shell, every piece quoted."""
    import shlex

    words = [f"{name}={shlex.quote(value)}" for name, value in ordered(env) if value]
    return " ".join(words + [shlex.quote(arg) for arg in argv])


def command_env(ctx, agent: str) -> dict[str, str]:
    """The variables a command needs to act as this seat on this store (ctx: the hook's
    mcpgate.claude.hookinput.HookContext, prepared)."""
    env = dict(ctx.store_env)
    env["AGENT_SALON_NAME"] = agent
    if ctx.rooms:
        env["AGENT_SALON_ROOM"] = ",".join(ctx.rooms)
    if ctx.session:
        env[SESSION_VARIABLE] = ctx.session
    return env


def salon_command(ctx, env: dict[str, str], *args: str) -> str:
    argv = ["salon", *args] if ctx.plain else salon_argv(*args, python=ctx.python)
    return shell_command(env, argv)


def ask_command(ctx, agent: str, room: str, holder: str) -> str:
    """The ready-to-run command that asks a claim's holder, in `room`."""
    env = command_env(ctx, agent)
    return salon_command(ctx, env, "send", room, "QUESTION", "<your question>", "--to", holder)
