"""`salon install ROOM[,ROOM…] [--dry-run] [--replace] [--http URL]` (SPEC §8).

Run in a project directory; wires Claude Code to the bus for this agent (AGENT_SALON_NAME,
else the directory's name):

* `.claude/settings.json`: the SessionStart / Stop / PostToolUse hooks (`salon hook …`),
  and with --http the `mcp_tool` checkin hook on UserPromptSubmit (bus.claudeconfig has
  the merge rules: every other hook is kept, ours are updated in place);
* `.mcp.json`: the server `agent-salon`, stdio (`salon mcp`) or HTTP (--http URL);
* `.claude/skills/salon/SKILL.md`: the protocol with this project's commands;
* the rooms (created if missing) and the store's migrations (applied if pending).

Commands are written with the absolute interpreter path (`<python> -m salon.cli …`) and,
in front of them, the variables that name the store (AGENT_SALON_DB — also the data
directory with the generated secret —, DATABASE_URL / REDIS_URL or AGENT_SALON_CONFIG;
never AGENT_SALON_SECRET) and the agent:
AGENT_SALON_NAME and AGENT_SALON_ROOM=<the rooms>. That is how the rooms are recorded:
a new seat of this agent joins them once (SPEC §3), whether it starts from a hook, a
`salon` command run from the skill, or the stdio MCP server.

Before a file is changed, its previous content is copied to `<file>.bak-<timestamp>`. A
file that is not valid JSON (or not in the shape Claude Code reads) is refused and left
untouched, and then nothing at all is written. A re-run with the same arguments changes
nothing. `--replace` removes every entry of ours first and names what it removed;
`--dry-run` writes nothing and says what it would do.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.core.management.base import CommandError

from bus import rules
from bus.management import cli
from bus.rules import RuleError

NEXT_STEP = "claude --dangerously-load-development-channels server:agent-salon"


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


@dataclass
class Planned:
    """One file: what is there, what should be there, and what happened."""

    path: Path
    label: str
    old: str | None  # None: the file does not exist
    new: str
    removed: list[str] = field(default_factory=list)
    backup: Path | None = None

    @property
    def changed(self) -> bool:
        return self.old != self.new


def read_json(path: Path, label: str) -> tuple[str | None, dict]:
    if not path.exists():
        return None, {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {label}: {exc}; nothing was changed") from None
    if not text.strip():
        return text, {}
    try:
        return text, json.loads(text)
    except ValueError as exc:
        raise CommandError(
            f"{label} is not valid JSON ({exc}); it was left untouched and nothing was "
            "changed — fix the file (or move it away) and run install again"
        ) from None


def backup_path(path: Path, stamp: str) -> Path:
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    number = 2
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{number}")
        number += 1
    return candidate


def write_file(plan: Planned, stamp: str) -> None:
    plan.path.parent.mkdir(parents=True, exist_ok=True)
    if plan.old is not None:
        plan.backup = backup_path(plan.path, stamp)
        plan.backup.write_bytes(plan.path.read_bytes())
    temporary = plan.path.with_name(f".{plan.path.name}.salon-tmp")
    temporary.write_text(plan.new, encoding="utf-8")
    os.replace(temporary, plan.path)


class Command(cli.BusCommand):
    help = (
        "Wire this project's Claude Code sessions to the bus: hooks in "
        ".claude/settings.json, the agent-salon MCP server in .mcp.json (stdio, or --http "
        "URL), the salon skill, and the rooms. Re-running updates instead of duplicating; "
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

    def handle(self, *, rooms, dry_run, replace, http, **options):
        from django.conf import settings

        from bus import claudeconfig
        from bus.claude import pythonpath_env, salon_argv, shell_command, store_env

        rooms = list(dict.fromkeys(name for names in rooms for name in names))
        agent, _ = cli.identity()
        project = Path.cwd()
        if http:
            try:
                mcp_entry = claudeconfig.http_server(http, agent, rooms)
            except ValueError as exc:
                raise self.usage(str(exc)) from None

        env = store_env(
            database_url=settings.DATABASE_URL,
            redis_url=settings.REDIS_URL,
            db_path=settings.DB_PATH,
        )
        env.update(pythonpath_env())
        env.update(AGENT_SALON_NAME=agent, AGENT_SALON_ROOM=",".join(rooms))
        if not http:
            mcp_entry = claudeconfig.stdio_server(salon_argv("mcp"), env)

        # Read and check everything before anything is written.
        settings_path = project / ".claude" / "settings.json"
        old_settings, settings_data = read_json(settings_path, ".claude/settings.json")
        mcp_path = project / ".mcp.json"
        old_mcp, mcp_data = read_json(mcp_path, ".mcp.json")
        commands = {
            kind: shell_command(env, salon_argv("hook", kind)) for kind in claudeconfig.KINDS
        }
        try:
            hooks = claudeconfig.merge_hooks(
                settings_data,
                claudeconfig.wanted_hooks(commands, http=bool(http)),
                replace=replace,
            )
            server = claudeconfig.merge_mcp(mcp_data, mcp_entry, replace=replace)
        except claudeconfig.ShapeError as exc:
            raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None
        skill_path = project / ".claude" / "skills" / "salon" / "SKILL.md"
        old_skill = skill_path.read_text(encoding="utf-8") if skill_path.exists() else None
        plans = [
            Planned(
                settings_path,
                ".claude/settings.json",
                old_settings,
                claudeconfig.dump(hooks.data) if hooks.changed else (old_settings or ""),
                hooks.removed,
            ),
            Planned(
                mcp_path,
                ".mcp.json",
                old_mcp,
                claudeconfig.dump(server.data) if server.changed else (old_mcp or ""),
                server.removed,
            ),
            Planned(
                skill_path,
                ".claude/skills/salon/SKILL.md",
                old_skill,
                claudeconfig.skill_text(
                    agent=agent,
                    rooms=rooms,
                    prefix=shell_command(env, salon_argv()),
                    http=bool(http),
                ),
            ),
        ]
        if not settings.DATABASE_URL and not Path(settings.DB_PATH).exists():
            # A new embedded store: opening it would create the file (not on a dry run).
            pending, room_states = "all", dict.fromkeys(rooms, "missing")
        else:
            pending = self.pending_migrations()
            room_states = self.room_states(rooms, pending)

        if not dry_run:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            for plan in plans:
                if plan.changed:
                    write_file(plan, stamp)
            if pending:
                from django.core.management import call_command

                call_command("migrate", verbosity=0, interactive=False)
            self.create_rooms(rooms, room_states)
        self.report(agent, project, rooms, plans, room_states, pending, env, http, dry_run)

    # ------------------------------------------------------------ the store

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
                existing = set(services.existing_room_names())
                archived = {r["room"] for r in services.list_rooms(archived=True)}
            except DatabaseError:  # not migrated yet: every room is new
                existing, archived = set(), set()
        else:
            existing = set(services.existing_room_names())
            archived = {r["room"] for r in services.list_rooms(archived=True)}
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
            _, created = services.create_room(name=room)
            if created:
                states[room] = "created"

    # ------------------------------------------------------------ the report

    def report(self, agent, project, rooms, plans, room_states, pending, env, http, dry_run):
        would = "would be " if dry_run else ""
        lines = [
            f"salon install{' (dry run: nothing written)' if dry_run else ''}: agent {agent} "
            f"in {project}, rooms {', '.join(rooms)}"
        ]
        for plan in plans:
            if not plan.changed:
                state = "unchanged"
            elif plan.old is None:
                state = f"{would}created"
            else:
                state = f"{would}updated"
                if plan.backup is not None:
                    state += f" (backup: {plan.backup.relative_to(project)})"
                elif dry_run:
                    state += " (the old content would be backed up first)"
            lines.append(f"  {plan.label}: {state}")
        for plan in plans:
            for item in plan.removed:
                lines.append(f"  {would}removed from {plan.label}: {item}")
        store = "DATABASE_URL" if env.get("DATABASE_URL") else env["AGENT_SALON_DB"]
        if pending:
            what = "its migrations" if pending == "all" else f"{pending} migration(s)"
            lines.append(f"  store {store}: {what} {would}applied")
        for room in rooms:
            state = room_states[room]
            if state == "missing":
                state = "would be created" if dry_run else "created"
            lines.append(f"  room {room}: {state}")
        mode = f"HTTP ({http})" if http else "stdio (salon mcp)"
        lines += [
            f"  MCP server agent-salon: {mode}",
            "Next:",
            f"  start Claude Code in {project} with: {NEXT_STEP}",
            "  (channels need claude.ai login and, in Team/Enterprise organizations, "
            "channelsEnabled in the managed settings; without them the Monitor command the "
            "SessionStart hook prints, and the Stop hook, still get every entry noticed)",
        ]
        if os.environ.get("AGENT_SALON_SECRET"):
            lines.append(
                "  note: AGENT_SALON_SECRET is set here but is not written into any file; "
                "Claude Code's environment needs it too (or use AGENT_SALON_CONFIG)"
            )
        self.say("\n".join(lines))
