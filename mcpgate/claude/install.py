"""`salon install ROOM[,ROOM…] [--dry-run] [--replace] [--http URL]`.

Run in a project directory; wires Claude Code to the bus for this agent (AGENT_SALON_NAME,
else the directory's name):

* the hooks: SessionStart / Stop / PostToolUse / SessionEnd (`salon hook …`), and with
  --http the `mcp_tool` checkin hook on UserPromptSubmit (mcpgate.claude.config has the
  merge rules: every other hook is kept, ours are updated in place);
* the MCP server `agent-salon`, stdio (`salon mcp`) or HTTP (--http URL);
* `.claude/skills/salon/SKILL.md`: the protocol with this project's commands;
* the rooms (created if missing) and the store's migrations (applied if pending);
* the project's directory, recorded for the agent: its policy for requests from other
  projects is read there (bus.services.requests).

Where the hooks and the server go depends on whether the commands can name nothing of
this machine. With this installation's `salon` on PATH and the default store (the data
directory's salon.db, nothing set), every command is plain `salon …` with only the agent
in front (AGENT_SALON_NAME and AGENT_SALON_ROOM=<the rooms>: that is how the rooms are
recorded: a new seat of this agent joins them once), and they go into the files
to commit: the hooks into `.claude/settings.json`, the server into `.mcp.json`.
Otherwise commands are written with the absolute interpreter path (`<python> -m
salon.cli …`) and the variables that name the store (AGENT_SALON_DB — also the data
directory with the generated secret —, DATABASE_URL / REDIS_URL or AGENT_SALON_CONFIG;
never AGENT_SALON_SECRET), and they go into this person's own files, which are never
committed: the hooks into `.claude/settings.local.json`, the server into Claude Code's
local MCP scope (`~/.claude.json` → `projects[<project>].mcpServers`, written by `claude
mcp add-json --scope local` when `claude` is on PATH, else edited with the same care as
the project's files, every other key kept). The report names the personal files and
why. Our hooks live in one settings file only (a copy in the other is removed and
named); a portable install removes a local-scope server of ours (it would take
precedence over .mcp.json); a personal install removes a `.mcp.json` entry of ours that
names this machine's paths (one that does not is the team's, and is kept).

With --http the daemon must answer at URL (/healthz) and be a server of this same store
(its X-Salon-Store fingerprint): otherwise every prompt would show a failing hook, or the
hooks and the MCP server would write to two different stores. Nothing is written then.

Before a file is changed, its previous content is copied to a `.bak` (one per file,
replaced each time): a project file's into the user's data directory
(`backups/<project>-<hash>/…`, mcpgate.claude.files.backup_path: never an untracked file
in the project), `~/.claude.json.bak` for the local scope. A JSON file is rewritten in
its own style (indentation, or one compact line), so git shows only what changed. A
file that is not strict JSON (bus.strict: no duplicate key, no number beyond a float,
…) or not in the shape Claude Code reads is refused and left untouched, and then nothing
at all is written. A re-run with the same arguments changes nothing. `--replace` removes
every entry of ours first and names what it removed; `--dry-run` writes nothing and
says what it would do.

Writes never follow a link (a project may come from anyone's repository, and a
repository can hold symbolic links): each file, and each backup, is written to a new
file beside it, created exclusively, given the mode of the file it replaces, and
renamed over it. A file or directory on the way that is itself a symbolic link
(`.claude/settings.json -> ~/shared.json`, `.claude -> …`) is refused, naming it, before
anything is written: to change what a link points to, edit that file yourself.
`salon uninstall` removes what install added (mcpgate.claude.uninstall).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from mcpgate.claude import config as claudeconfig
from mcpgate.claude import files, uninstall
from mcpgate.claude.commandline import (
    pythonpath_env,
    salon_argv,
    salon_on_path,
    shell_command,
    store_env,
)
from mcpgate.claude.files import Planned
from mcpgate.claude.plans import (
    LOCAL_SETTINGS,
    MCP,
    SETTINGS,
    SKILL,
    file_lines,
    json_plan,
    local_scope_plan,
    shown_path,
)

# What /healthz names its store by (salon.store.STORE_HEADER).
STORE_HEADER = "X-Salon-Store"
NEXT_STEP = "claude --dangerously-load-development-channels server:agent-salon"


def not_portable_because() -> str:
    """Why commands must carry this machine's paths, or "" when plain `salon …` works."""
    if not salon_on_path():
        return "this installation's `salon` is not on PATH"
    if pythonpath_env():
        return "agent-salon is found through PYTHONPATH"
    if not settings.DEFAULT_STORE:
        return "the store is not the default one"
    return ""


def command_form(portable: bool):
    """(the environment, argv(*args)) the written commands carry: plain `salon …` when
    they are portable, else this interpreter and the store's settings."""
    if portable:
        return {}, lambda *args: ["salon", *args]
    env = store_env(
        database_url=settings.DATABASE_URL,
        redis_url=settings.REDIS_URL,
        db_path=settings.DB_PATH,
    )
    env.update(pythonpath_env())
    return env, salon_argv


def store_lines(rooms, room_states, pending, dry_run) -> list[str]:
    """The report's lines on the store's migrations and the rooms."""
    would = "would be " if dry_run else ""
    lines = []
    store = "DATABASE_URL" if settings.DATABASE_URL else str(settings.DB_PATH)
    if pending:
        what = "its migrations" if pending == "all" else f"{pending} migration(s)"
        lines.append(f"  store {store}: {what} {would}applied")
    for room in rooms:
        state = room_states[room]
        if state == "missing":
            state = "would be created" if dry_run else "created"
        lines.append(f"  room {room}: {state}")
    return lines


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-salon")
    except PackageNotFoundError:
        return "0.0.0"


def project(agent: str, rooms: list[str], *, dry_run, replace, http, triage) -> str:
    """Wire this directory's Claude Code sessions for `agent`; the report to print."""
    here = Path.cwd()
    why = not_portable_because()
    portable = not why
    env, argv = command_form(portable)
    env.update(AGENT_SALON_NAME=agent, AGENT_SALON_ROOM=",".join(rooms))
    if triage:
        env["AGENT_SALON_TRIAGE_CMD"] = claudeconfig.TRIAGE_COMMAND
    if http:
        try:
            mcp_entry = claudeconfig.http_server(
                http, agent, rooms, shell_command({}, argv("hook", "mcp-headers"))
            )
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        owner_read = check_daemon(claudeconfig.base_url(http))
    else:
        mcp_entry, owner_read = claudeconfig.stdio_server(argv("mcp"), env), None

    token_why = None
    if http:
        token_why = http_token_needed(claudeconfig.base_url(http), agent, owner_read)
    # Read and check everything before anything is written.
    plans = project_plans(here, portable, env, argv, mcp_entry, http=bool(http),
                          replace=replace)  # fmt: skip
    skill_path = here / SKILL
    skill = claudeconfig.skill_text(
        agent=agent, rooms=rooms, prefix=shell_command(env, argv()), http=bool(http)
    )
    plans.append(Planned(skill_path, SKILL, files.read_bytes(skill_path, SKILL),
                         skill.encode()))  # fmt: skip
    pending, room_states = store_state(rooms)
    if not dry_run:
        write(plans, here, rooms, room_states, pending)
        from bus import services

        # Where the here is: its policy for requests is read there.
        services.seats.record_root(agent=agent, root=str(here))
    lines = report(
        agent, here, rooms, plans, room_states, pending, http, dry_run, why=why,
        triage=triage,
    )  # fmt: skip
    if token_why:
        lines += "\n" + provision_token(claudeconfig.base_url(http), agent, token_why, dry_run)
    return lines


def project_plans(project, portable, env, argv, mcp_entry, *, http, replace) -> list[Planned]:
    """The project's settings files, .mcp.json and the local MCP scope: what each
    should hold. Portable: the hooks in .claude/settings.json and the server in
    .mcp.json (files to commit); else the hooks in .claude/settings.local.json and the
    server in the local MCP scope (this person's own). Our hooks live in one of the
    two settings files only: a copy in the other is removed. A local-scope server of
    ours would shadow the one in .mcp.json, so a portable install removes it; a
    .mcp.json entry naming this machine's paths is removed by a personal install
    (one that names none is kept: it is the team's, and the local one takes
    precedence in this person's sessions)."""
    hooks_label, other_label = (
        (SETTINGS, LOCAL_SETTINGS) if portable else (LOCAL_SETTINGS, SETTINGS)
    )
    for label in (SETTINGS, LOCAL_SETTINGS, MCP, SKILL):
        files.refuse_links(project, project / label, label)  # a link at `<file>.bak` is replaced
    old_hooks, hooks_data = files.read_json(project / hooks_label, hooks_label)
    old_other, other_data = files.read_json(project / other_label, other_label)
    old_mcp, mcp_data = files.read_json(project / MCP, MCP)
    commands = {kind: shell_command(env, argv("hook", kind)) for kind in claudeconfig.KINDS}
    key = files.project_key(project)
    try:
        hooks = claudeconfig.merge_hooks(
            hooks_data, claudeconfig.wanted_hooks(commands, http=http), replace=replace
        )
        other = claudeconfig.without_our_hooks(other_data, other_label)
        if portable:
            server = claudeconfig.merge_mcp(mcp_data, mcp_entry, replace=replace)
        elif claudeconfig.names_this_machine(
            (claudeconfig.check_mcp(mcp_data).get("mcpServers") or {}).get(claudeconfig.SERVER_NAME)
        ):
            server = claudeconfig.without_our_server(mcp_data)
        else:
            server = claudeconfig.Merge(mcp_data, changed=False)
    except claudeconfig.ShapeError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None
    plans = [json_plan(project / hooks_label, hooks_label, old_hooks, hooks)]
    if other.changed:
        plans.append(json_plan(project / other_label, other_label, old_other, other,
                               f" (moved to {hooks_label})"))  # fmt: skip
    if portable or server.changed:
        note = "" if portable else " (moved to the local MCP scope)"
        plans.append(json_plan(project / MCP, MCP, old_mcp, server, note))
    if portable:
        local = local_scope_plan(
            project,
            key,
            lambda data: claudeconfig.without_local_server(data, key),
            removed_note=f" (it would take precedence over {MCP})",
        )
        if local is not None and local.changed:
            plans.append(local)
    else:
        local = local_scope_plan(
            project,
            key,
            lambda data: claudeconfig.merge_local_mcp(data, key, mcp_entry, replace=replace),
        )
        plans.append(local)
    return plans


# ------------------------------------------------------------ the plugin


def plugin(rooms: list[str], *, dry_run: bool) -> None:
    """Write the plugin's local marketplace into the data directory, then have Claude
    Code add the marketplace and install the plugin for this user (scope user: one
    install serves every project; each project's sessions are its own agent, named
    after its directory). Re-running rewrites the files, which Claude Code reads from
    that directory at each session start; both `claude` steps are idempotent."""
    project = Path.cwd()
    why = not_portable_because()
    env, argv = command_form(not why)
    env["AGENT_SALON_ROOM"] = ",".join(rooms)
    prefix = shell_command(env, argv())
    content = claudeconfig.plugin_files(
        version=installed_version(),
        commands={
            # The plugin's own monitor runs `salon wait`: the context asks for no other.
            k: shell_command(
                {**env, "AGENT_SALON_WATCHED": "1"} if k == "session-start" else env,
                argv("hook", k),
            )
            for k in claudeconfig.KINDS
        },
        wait_command=shell_command(env, argv("wait")),
        server=claudeconfig.stdio_server(argv("mcp"), env),
        skill=claudeconfig.skill_text(
            agent="<project>", rooms=rooms, prefix=prefix, http=False, plugin=True
        ),
    )
    data_dir = settings.USER_DATA_DIR
    root = data_dir / "claude-plugin"
    plans = []
    for relative, text in content.items():
        path = root / relative
        files.refuse_links(data_dir.parent, path, str(path))
        old = files.read_bytes(path, str(path))
        plans.append(Planned(path, str(path), old, text.encode(), backed_up=False))
    pending, room_states = store_state(rooms)
    claude = files.claude_on_path()
    steps = [
        ["plugin", "marketplace", "add", str(root)],
        ["plugin", "install", f"{claudeconfig.PLUGIN_NAME}@{claudeconfig.MARKETPLACE_NAME}",
         "--scope", "user"],
    ]  # fmt: skip
    if not dry_run:
        write(plans, project, rooms, room_states, pending)
        if claude:
            for step in steps:
                files.run_claude([claude, *step], cwd=project)
    return report_plugin(root, plans, rooms, room_states, pending, steps, claude, dry_run, why=why)


def report_plugin(root, plans, rooms, room_states, pending, steps, claude, dry_run, *, why):
    would = "would be " if dry_run else ""
    project = Path.cwd()
    changed = [plan for plan in plans if plan.changed]
    created = sum(plan.old is None for plan in changed)
    state = (
        f"{created} {would}created, {len(changed) - created} {would}updated"
        if changed
        else "unchanged"
    )
    lines = [
        f"salon install --plugin{' (dry run: nothing written)' if dry_run else ''}: "
        f"rooms {', '.join(rooms)}",
        f"  plugin {claudeconfig.PLUGIN_NAME} in the local marketplace "
        f"{claudeconfig.MARKETPLACE_NAME}, {shown_path(root, project)}: {len(plans)} "
        f"files, {state}",
    ]
    lines += store_lines(rooms, room_states, pending, dry_run)
    commands = [f"claude {' '.join(step)}" for step in steps]
    if claude and not dry_run:
        lines += [f"  ran: {command}" for command in commands]
    elif claude:
        lines += [f"  would run: {command}" for command in commands]
    else:
        lines += [
            "  `claude` is not on PATH: install the plugin yourself with",
            *(f"    {command}" for command in commands),
        ]
    if why:
        lines.append(
            f"  note: the plugin's commands name this machine's paths ({why}); it lives "
            "in your data directory and your user settings, never in a project"
        )
    lines += [
        "Then every project's Claude Code sessions load it (scope user): each project is "
        "the agent named after its directory, in these rooms; a monitor runs `salon "
        "wait` for the whole session, so every claim is told with nothing to arm.",
    ]
    leftovers = {
        root: found
        for root in known_projects(project, pending)
        if (found := project_leftovers(root))
    }
    if leftovers:
        lines.append(
            "  note: agent-salon entries from `salon install` are also in these "
            "projects: with the plugin both would run; `salon uninstall` there removes "
            "them:"
        )
        lines += [f"    {root} ({', '.join(found)})" for root, found in leftovers.items()]
    return "\n".join(lines)


def known_projects(project: Path, pending) -> list[Path]:
    """This directory, and every project the store knows (where `salon install` ran or
    a session started): a project install there would run beside the plugin too."""
    roots = [project]
    if pending != "all":  # a store not made yet knows no project
        from django.db import DatabaseError

        from bus import services

        # Not migrated yet (a dry run): this directory only.
        with contextlib.suppress(DatabaseError):
            roots += [Path(root) for root in services.seats.project_roots()]
    return [root for root in dict.fromkeys(roots) if root.is_dir()]


def project_leftovers(project: Path) -> list[str]:
    try:
        plans = uninstall.project_plans(project)
    except CommandError:
        return []
    return [plan.label for plan in plans if plan.changed and not plan.label.endswith(".bak")]


# ------------------------------------------------------------ the store


# How a daemon's /healthz says whether it could read who a loopback connection is
# (salon.gate); install cannot import the project's module to name it.
OWNER_HEADER = "x-salon-caller"


def http_token_needed(base: str, agent: str, owner_read: bool | None) -> str | None:
    """Why the HTTP entry's calls need a bearer token, or None: the daemon cannot tell
    which local user calls it (salon.gate: its /healthz said so, `owner_read`; None when
    it did not say, and then a connection of this process's own is looked up), or wants
    a token of every caller anyway."""
    from urllib.parse import urlsplit

    from salond import peers

    host = urlsplit(base).hostname or ""
    if settings.REQUIRE_TOKENS:
        return "AGENT_SALON_REQUIRE_TOKENS=1"
    if host != "localhost" and not peers.is_loopback(host):
        return f"the daemon is reached beyond this machine ({host})"
    if owner_read is False or (owner_read is None and not peers.works(settings.PEER_LOOKUP)):
        return "the daemon cannot read which local user a connection is"
    from bus import services

    if any(row["label"] == agent for row in services.tokens.list_tokens()):
        return f"{agent} has a token"
    return None


def provision_token(base: str, agent: str, why: str, dry_run: bool) -> str:
    """A token for `agent`, kept in this user's data directory for the headers helper
    (mcpgate.claude.httptokens); one still valid there is kept. The report's line."""
    from bus import services
    from mcpgate.claude import httptokens

    path = httptokens.path_in(str(settings.USER_DATA_DIR))
    kept = httptokens.lookup(path, f"{base}/mcp?label={agent}")
    valid = kept is not None and (
        services.tokens.token_problem(label=agent, token=kept, required=True) is None
    )
    if valid:
        state = "kept"
    elif dry_run:
        state = "would be issued"
    else:
        httptokens.save(path, base, agent, services.tokens.issue_token(label=agent))
        state = "issued"
    return (
        f"  token: {why}, so every call needs a token; {agent}'s is {state} in {path} "
        "(0600, never in a project file), sent by the headers helper (salon hook mcp-headers)"
    )


def check_daemon(base: str) -> bool | None:
    """The daemon at `base` answers, and serves this store (nothing is written if not).
    Whether it could read who this connection is (its OWNER_HEADER; None: not said)."""
    import httpx

    try:
        answer = httpx.get(f"{base}/healthz", timeout=5)
    except httpx.HTTPError as exc:
        raise CommandError(
            f"no agent-salon daemon answers at {base} ({type(exc).__name__}); start it "
            "with `salon serve` and run install again (nothing was changed)"
        ) from None
    if answer.status_code != 200:
        raise CommandError(
            f"{base}/healthz answered {answer.status_code}: not a working agent-salon "
            "daemon; check the URL (nothing was changed)"
        )
    theirs = answer.headers.get(STORE_HEADER)
    ours = "DATABASE_URL" if settings.DATABASE_URL else settings.DB_PATH
    if theirs != settings.STORE_FINGERPRINT:
        raise CommandError(
            f"the daemon at {base} serves another store than this command's "
            f"({ours}); the hooks and the MCP server would write to two different stores. "
            "Start the daemon with the same settings, or run install "
            "with its settings (nothing was changed)"
        )
    return {"read": True, "unknown": False}.get(answer.headers.get(OWNER_HEADER, ""))


def store_state(rooms: list[str]) -> tuple[int | str, dict[str, str]]:
    """(the migrations pending, room → exists / missing), read before anything is
    written."""
    if not settings.DATABASE_URL and not Path(settings.DB_PATH).exists():
        # A new embedded store: opening it would create the file (not on a dry run).
        return "all", dict.fromkeys(rooms, "missing")
    pending = pending_migrations()
    return pending, _room_states(rooms, pending)


def write(plans, project, rooms, room_states, pending) -> None:
    """The planned files, then the store's tables (every app's: install runs with
    the full app set), then the missing rooms."""
    from django.core.management import call_command

    for plan in plans:
        files.apply(plan, cwd=project)
    if pending:
        call_command("migrate", verbosity=0, interactive=False)
    create_rooms(rooms, room_states)


def pending_migrations() -> int:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def _room_states(rooms: list[str], pending: int) -> dict[str, str]:
    """room → exists / missing; an archived room is refused before anything is written."""
    from bus import services

    if pending:
        from django.db import DatabaseError

        try:
            existing = set(services.rooms.existing_room_names())
            archived = {r["room"] for r in services.rooms.list_rooms(archived=True)}
        except DatabaseError:  # not migrated yet: every room is new
            existing, archived = set(), set()
    else:
        existing = set(services.rooms.existing_room_names())
        archived = {r["room"] for r in services.rooms.list_rooms(archived=True)}
    for room in rooms:
        if room in archived:
            raise CommandError(
                f"room {room!r} is archived; bring it back with `salon rooms --restore "
                f"{room}` and run install again (nothing was changed)"
            )
    return {room: "exists" if room in existing else "missing" for room in rooms}


def create_rooms(rooms: list[str], states: dict[str, str]) -> None:
    from bus import services

    for room in rooms:
        _, created = services.rooms.create_room(name=room)
        if created:
            states[room] = "created"


# ------------------------------------------------------------ the report


def report(agent, project, rooms, plans, room_states, pending, http, dry_run, *, why, triage):
    lines = [
        f"salon install{' (dry run: nothing written)' if dry_run else ''}: agent {agent} "
        f"in {project}, rooms {', '.join(rooms)}",
        *file_lines(plans, project, dry_run),
    ]
    lines += store_lines(rooms, room_states, pending, dry_run)
    mode = f"HTTP ({http})" if http else "stdio (salon mcp)"
    where = MCP if not why else "the local MCP scope"
    lines.append(f"  MCP server agent-salon: {mode}, in {where}")
    would = "would be " if dry_run else ""
    if triage:
        lines.append(
            f"  judge: AGENT_SALON_TRIAGE_CMD {would}set to `{claudeconfig.TRIAGE_COMMAND}` "
            + (
                "in the hooks' commands (the daemon at the --http address judges with "
                "its own environment's)"
                if http
                else "in the hooks' commands and the MCP server's environment"
            )
        )
    if http and not why:
        # A teammate who clones the project gets this address too.
        lines.append(
            f"  note: {MCP}, a file to commit, {would}names this daemon's address "
            f"({claudeconfig.base_url(http)}): a teammate's sessions need an agent-salon "
            "daemon there too; install without --http for an entry that names no address"
        )
    if why:
        lines.append(
            f"  note: the commands name this machine's paths ({why}), so they went into "
            f"personal files, never committed: the hooks into {LOCAL_SETTINGS}, the MCP "
            "server into Claude Code's local MCP scope (~/.claude.json, for this project "
            f"only). {SKILL} names them too: keep it out of version control. With this "
            "`salon` on PATH and the default store, install writes files to commit instead"
        )
    lines += [
        "Next:",
        f"  start Claude Code in {project} with: {NEXT_STEP}",
    ]
    if not why:
        lines.append(
            "  Claude Code asks once about the project's MCP server: choose \"Use this and "
            'all future MCP servers in this project" (its default, "Continue without", '
            "leaves the session without the salon's tools; `claude mcp reset-project-choices` "
            "asks again)"
        )
    lines.append(
        "  (channels need claude.ai login and, in Team/Enterprise organizations, "
        "channelsEnabled in the managed settings; without them the Monitor command the "
        "SessionStart hook prints, and the Stop hook, still get every entry noticed)"
    )
    if os.environ.get("AGENT_SALON_SECRET"):
        lines.append(
            "  note: AGENT_SALON_SECRET is set here but is not written into any file; "
            "Claude Code's environment needs it too (or use AGENT_SALON_CONFIG)"
        )
    return "\n".join(lines)
