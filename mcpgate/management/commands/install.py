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
`salon uninstall` removes what install added (mcpgate.management.commands.uninstall).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from bus import rules
from bus.management.base import BusCommand, caller_from_settings
from bus.rules import RuleError
from mcpgate.claude import config as claudeconfig
from mcpgate.claude import files
from mcpgate.claude.commandline import (
    pythonpath_env,
    salon_argv,
    salon_on_path,
    shell_command,
    store_env,
)
from mcpgate.claude.files import Planned

# What /healthz names its store by (salon.store.STORE_HEADER).
STORE_HEADER = "X-Salon-Store"
NEXT_STEP = "claude --dangerously-load-development-channels server:agent-salon"
SETTINGS = ".claude/settings.json"
LOCAL_SETTINGS = ".claude/settings.local.json"
MCP = ".mcp.json"
SKILL = ".claude/skills/salon/SKILL.md"


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


def rooms_arg(value: str) -> list[str]:
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one room, e.g. team or team,ops")
    for name in names:
        if name.startswith("-"):
            raise argparse.ArgumentTypeError(f"{name!r} looks like a flag, not a room name")
        try:
            rules.validate_name(name, "room")
        except RuleError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return names


def shown_path(path: Path, project: Path) -> str:
    """A path as the report names it: relative to the project, else from ~."""
    try:
        return str(path.relative_to(project))
    except ValueError:
        pass
    home = Path(os.environ.get("HOME") or Path.home())
    try:
        return f"~/{path.relative_to(home)}"
    except ValueError:
        return str(path)


def json_plan(path: Path, label: str, old: bytes | None, merge, removed_note: str = "") -> Planned:
    """The plan for a JSON file from a claudeconfig.Merge of its content."""
    new = files.dump_like(merge.data, old) if merge.changed else old
    removed = [f"{item}{removed_note}" for item in merge.removed]
    return Planned(path, label, old, new, removed)


def local_scope_plan(
    project: Path, key: str, merge_for, *, removed_note: str = ""
) -> Planned | None:
    """The plan for Claude Code's local MCP scope (`projects[key].mcpServers` of the user
    configuration): `merge_for(data)` gives the claudeconfig.Merge. Made with `claude mcp
    add-json|remove --scope local` when `claude` is on PATH, else written with the same
    care as the project's files. None: the file does not exist and need not."""
    path = files.user_config_path()
    label = f"{shown_path(path, project)} (local MCP scope of {key})"
    if path.is_symlink():
        raise CommandError(
            f"{shown_path(path, project)} is a symbolic link; salon does not write through "
            "links, so nothing was changed: put `claude` on PATH (salon then lets it make "
            "the change) and run the command again"
        )
    old, data = files.read_json(path, shown_path(path, project))
    try:
        merge = merge_for(data)
    except claudeconfig.ShapeError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None
    plan = json_plan(path, label, old, merge, removed_note)
    plan.private = True
    if not plan.changed:
        return plan if old is not None else None
    claude = files.claude_on_path()
    if claude:
        before = claudeconfig.local_server(data, key)
        after = claudeconfig.local_server(merge.data, key)
        scope = ["--scope", "local", claudeconfig.SERVER_NAME]
        if before is not None:
            plan.claude.append([claude, "mcp", "remove", *scope])
        if after is not None:
            plan.claude.append(
                [claude, "mcp", "add-json", *scope, json.dumps(after, ensure_ascii=False)]
            )
    return plan


class Command(BusCommand):
    help = (
        "Wire this project's Claude Code sessions to the bus: hooks in "
        ".claude/settings.json, the agent-salon MCP server in .mcp.json (stdio, or --http "
        "URL) — or, when the commands must name this machine's paths, in "
        ".claude/settings.local.json and Claude Code's local MCP scope —, the salon skill, "
        "and the rooms. Re-running updates instead of duplicating; "
        "--replace removes our old entries first; --dry-run writes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "rooms",
            nargs="+",
            type=rooms_arg,
            metavar="ROOM[,ROOM…]",
            help="the rooms this agent's sessions join",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="write nothing; say what would be done"
        )
        parser.add_argument(
            "--replace",
            action="store_true",
            help="remove every hook and server entry of ours first (and name them)",
        )
        parser.add_argument(
            "--http",
            metavar="URL",
            help="use the daemon's HTTP endpoint (e.g. http://127.0.0.1:9315) instead of stdio",
        )
        parser.add_argument(
            "--triage",
            action="store_true",
            help="judge with a small model (the letterbox and the safety net): the hooks and "
            "the MCP server get AGENT_SALON_TRIAGE_CMD, a headless toolless `claude -p`",
        )
        parser.add_argument(
            "--plugin",
            action="store_true",
            help="the recommended set-up: a Claude Code plugin for every project of this "
            "user (stdio server, hooks, skill, and a monitor running `salon wait` for the "
            "whole session), installed with `claude plugin install`; the project is not "
            "touched",
        )

    def handle(self, *, rooms, dry_run, replace, http, plugin, triage=False, **options):
        rooms = list(dict.fromkeys(name for names in rooms for name in names))
        if plugin:
            if http:
                raise self.usage("--plugin runs the MCP server over stdio: leave out --http")
            return self.handle_plugin(rooms, dry_run=dry_run)
        caller = caller_from_settings()
        try:
            agent = rules.validate_name(caller["agent"], "agent")
        except RuleError as exc:
            raise CommandError(
                f"{exc} (the agent name comes from {caller['agentFrom']}; "
                "set AGENT_SALON_NAME=<name>)"
            ) from None
        project = Path.cwd()
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
                raise self.usage(str(exc)) from None
            self.check_daemon(claudeconfig.base_url(http))
        else:
            mcp_entry = claudeconfig.stdio_server(argv("mcp"), env)

        # Read and check everything before anything is written.
        plans = self.plan(project, portable, env, argv, mcp_entry, http=bool(http),
                          replace=replace)  # fmt: skip
        skill_path = project / SKILL
        skill = claudeconfig.skill_text(
            agent=agent, rooms=rooms, prefix=shell_command(env, argv()), http=bool(http)
        )
        plans.append(Planned(skill_path, SKILL, files.read_bytes(skill_path, SKILL),
                             skill.encode()))  # fmt: skip
        pending, room_states = self.store_state(rooms)
        if not dry_run:
            self.write(plans, project, rooms, room_states, pending)
            from bus import services

            # Where the project is: its policy for requests is read there.
            services.seats.record_root(agent=agent, root=str(project))
        self.report(
            agent, project, rooms, plans, room_states, pending, http, dry_run, why=why,
            triage=triage,
        )  # fmt: skip

    def plan(self, project, portable, env, argv, mcp_entry, *, http, replace) -> list[Planned]:
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
            files.refuse_links(
                project, project / label, label
            )  # a link at `<file>.bak` is replaced
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
                (claudeconfig.check_mcp(mcp_data).get("mcpServers") or {}).get(
                    claudeconfig.SERVER_NAME
                )
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

    def handle_plugin(self, rooms: list[str], *, dry_run: bool) -> None:
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
        pending, room_states = self.store_state(rooms)
        claude = files.claude_on_path()
        steps = [
            ["plugin", "marketplace", "add", str(root)],
            ["plugin", "install", f"{claudeconfig.PLUGIN_NAME}@{claudeconfig.MARKETPLACE_NAME}",
             "--scope", "user"],
        ]  # fmt: skip
        if not dry_run:
            self.write(plans, project, rooms, room_states, pending)
            if claude:
                for step in steps:
                    files.run_claude([claude, *step], cwd=project)
        self.report_plugin(
            root, plans, rooms, room_states, pending, steps, claude, dry_run, why=why
        )

    def report_plugin(
        self, root, plans, rooms, room_states, pending, steps, claude, dry_run, *, why
    ):
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
            for root in self.known_projects(project, pending)
            if (found := self.project_leftovers(root))
        }
        if leftovers:
            lines.append(
                "  note: agent-salon entries from `salon install` are also in these "
                "projects: with the plugin both would run; `salon uninstall` there removes "
                "them:"
            )
            lines += [f"    {root} ({', '.join(found)})" for root, found in leftovers.items()]
        self.say("\n".join(lines))

    def known_projects(self, project: Path, pending) -> list[Path]:
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

    def project_leftovers(self, project: Path) -> list[str]:
        from mcpgate.management.commands.uninstall import Command as Uninstall

        try:
            plans = Uninstall().plan(project)
        except CommandError:
            return []
        return [plan.label for plan in plans if plan.changed and not plan.label.endswith(".bak")]

    # ------------------------------------------------------------ the store

    def check_daemon(self, base: str) -> None:
        """The daemon at `base` answers, and serves this store (nothing is written if not)."""
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

    def store_state(self, rooms: list[str]) -> tuple[int | str, dict[str, str]]:
        """(the migrations pending, room → exists / missing), read before anything is
        written."""
        if not settings.DATABASE_URL and not Path(settings.DB_PATH).exists():
            # A new embedded store: opening it would create the file (not on a dry run).
            return "all", dict.fromkeys(rooms, "missing")
        pending = self.pending_migrations()
        return pending, self.room_states(rooms, pending)

    def write(self, plans, project, rooms, room_states, pending) -> None:
        """The planned files, then the store's tables (every app's: install runs with
        the full app set), then the missing rooms."""
        from django.core.management import call_command

        for plan in plans:
            files.apply(plan, cwd=project)
        if pending:
            call_command("migrate", verbosity=0, interactive=False)
        self.create_rooms(rooms, room_states)

    def pending_migrations(self) -> int:
        from django.db import connection
        from django.db.migrations.executor import MigrationExecutor

        executor = MigrationExecutor(connection)
        return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))

    def room_states(self, rooms: list[str], pending: int) -> dict[str, str]:
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

    def create_rooms(self, rooms: list[str], states: dict[str, str]) -> None:
        from bus import services

        for room in rooms:
            _, created = services.rooms.create_room(name=room)
            if created:
                states[room] = "created"

    # ------------------------------------------------------------ the report

    def report(
        self, agent, project, rooms, plans, room_states, pending, http, dry_run, *, why, triage
    ):
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
        self.say("\n".join(lines))


def file_lines(plans: list[Planned], project: Path, dry_run: bool) -> list[str]:
    """One line per file (created / updated / removed / unchanged, and its backup), then
    one per entry removed from a file."""
    would = "would be " if dry_run else ""
    lines = []
    for plan in plans:
        if not plan.changed:
            state = "unchanged"
        elif plan.old is None:
            state = f"{would}created"
        else:
            state = f"{would}{'removed' if plan.new is None else 'updated'}"
            if plan.backup is not None:
                state += f" (backup: {shown_path(plan.backup, project)})"
            elif dry_run and plan.backed_up:
                state += " (the old content would be backed up first)"
        if plan.changed and plan.claude:
            how = " and ".join(
                f"`claude {' '.join(argv[1:3])} --scope local`" for argv in plan.claude
            )
            state += f", by {how}"
        lines.append(f"  {plan.label}: {state}")
    for plan in plans:
        for item in plan.removed:
            lines.append(f"  {would}removed from {plan.label}: {item}")
    return lines
