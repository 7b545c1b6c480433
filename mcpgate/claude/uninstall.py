"""`salon uninstall [--dry-run] [--plugin]`: remove from this project what `salon install`
added (with --plugin: the plugin `salon install --plugin` set up for this user).

Wherever it is — `install` writes the files to commit or the personal ones depending on
the machine, and an earlier install may have written the others:

* our hooks (recognised by their command, `salon hook <kind>` / `salon.cli hook <kind>`,
  or for the checkin hook by its `mcp_tool` server and tool) from `.claude/settings.json`
  and `.claude/settings.local.json`; a group, event or `hooks` left empty by that goes
  too, every other hook stays;
* the server `agent-salon` from `.mcp.json` and from Claude Code's local MCP scope of
  this project (`~/.claude.json`, by `claude mcp remove --scope local` when `claude` is
  on PATH); `mcpServers` left empty in `.mcp.json` goes too;
* the skill `.claude/skills/salon/SKILL.md` (and the backup install kept beside it), and
  the folders that leaves empty (`.claude/skills/salon`, `.claude/skills`, `.claude`).

A file install edited gets its own bytes back: when the backup install made of it (in
the user's data directory, mcpgate.claude.files.backup_path) holds exactly what is left,
that is written back; otherwise the file is rewritten in its own style (indentation, or
one compact line). A file left holding nothing but `{}` is removed (install made it);
`mcpServers`, or a project of the local scope, that removing ours leaves empty goes too.
Each changed or removed configuration file is first backed up in the same place (never
an untracked file in the project): after install and uninstall `git status` is as before.
The same care as install: strict JSON in (an invalid file is refused, and then nothing
is changed), atomic writes, never through a symbolic link. The rooms and the store are
left alone (`salon rooms --archive ROOM`). `--dry-run` says what would be removed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from mcpgate.claude import config as claudeconfig
from mcpgate.claude import files
from mcpgate.claude.files import Planned
from mcpgate.claude.plans import (
    LOCAL_SETTINGS,
    MCP,
    SETTINGS,
    SKILL,
    file_lines,
    json_plan,
    local_scope_plan,
)


def project(*, dry_run: bool) -> str:
    """Remove ours from this directory; the report to print."""
    here = Path.cwd()
    plans = project_plans(here)
    if not dry_run:
        for plan in plans:
            files.apply(plan, cwd=here)
        remove_empty_folders(here)
    changed = [plan for plan in plans if plan.changed]
    head = f"salon uninstall{' (dry run: nothing changed)' if dry_run else ''}: {here}"
    if not changed:
        return f"{head}\n  nothing of agent-salon's was found here"
    return "\n".join([head, *file_lines(changed, here, dry_run)])


def plugin(*, dry_run: bool) -> str:
    """Claude Code forgets the plugin and its marketplace (`claude plugin uninstall`,
    `claude plugin marketplace remove`, or the two commands to run when `claude` is
    not on PATH); then the marketplace's directory goes."""
    root = settings.USER_DATA_DIR / "claude-plugin"
    steps = [
        ["plugin", "uninstall", f"{claudeconfig.PLUGIN_NAME}@{claudeconfig.MARKETPLACE_NAME}",
         "--scope", "user"],
        ["plugin", "marketplace", "remove", claudeconfig.MARKETPLACE_NAME],
    ]  # fmt: skip
    claude = files.claude_on_path()
    head = f"salon uninstall --plugin{' (dry run: nothing changed)' if dry_run else ''}"
    lines = [head]
    if not dry_run:
        if claude:
            for step in steps:
                files.run_claude([claude, *step], cwd=Path.cwd())
        if root.is_symlink():
            root.unlink()
        elif root.exists():
            shutil.rmtree(root)
    would = "would be " if dry_run else ""
    if claude:
        lines += [f"  {would}run: claude {' '.join(step)}" for step in steps]
    else:
        lines.append("  `claude` is not on PATH; run these where it is:")
        lines += [f"    claude {' '.join(step)}" for step in steps]
    lines.append(f"  {root}: {would}removed" if root.exists() or not dry_run else "")
    return "\n".join(line for line in lines if line)


def project_plans(project: Path) -> list[Planned]:
    """What uninstall would change in `project` (install reads it for a plugin install's
    leftovers)."""
    for label in (SETTINGS, LOCAL_SETTINGS, MCP, SKILL):
        files.refuse_links(project, project / label, label)
    plans = []
    try:
        for label in (SETTINGS, LOCAL_SETTINGS):
            old, data = files.read_json(project / label, label)
            merge = claudeconfig.without_our_hooks(data, label)
            plans.append(undone(json_plan(project / label, label, old, merge), project))
        old, data = files.read_json(project / MCP, MCP)
        merge = claudeconfig.without_our_server(data)
        plans.append(undone(json_plan(project / MCP, MCP, old, merge), project))
    except claudeconfig.ShapeError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None
    key = files.project_key(project)
    local = local_scope_plan(
        project, key, lambda data: claudeconfig.without_local_server(data, key)
    )
    if local is not None:
        plans.append(undone(local, project))
    for path, label in ((project / SKILL, SKILL), (project / f"{SKILL}.bak", f"{SKILL}.bak")):
        old = files.read_bytes(path, label)
        if old is not None:
            plan = Planned(path, label, old, None, backed_up=False)
            plans.append(plan)
    return plans


def remove_empty_folders(project: Path) -> None:
    skill_dir = (project / SKILL).parent
    for folder in (skill_dir, skill_dir.parent, skill_dir.parent.parent):
        if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()


def undone(plan: Planned, project: Path) -> Planned:
    """The file as it was before install: when the backup install made holds exactly
    what is left once ours is removed, its own bytes come back (a compact line stays
    compact, key order and spacing included), so git sees no change; a file left holding
    nothing but `{}` is removed altogether (install made it)."""
    if not plan.changed or plan.new is None:
        return plan
    earlier = files.read_bytes(files.backup_path(plan.path, project), plan.label)
    if earlier is not None and files.same_json(earlier, json.loads(plan.new)):
        plan.new = earlier
    elif plan.new.strip() == b"{}":
        plan.new = None
    return plan
