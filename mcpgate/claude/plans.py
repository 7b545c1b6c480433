"""What `salon install` and `salon uninstall` share: where each file is, the plan for a
JSON file or for Claude Code's local MCP scope, and the report's line for each file."""

from __future__ import annotations

import json
import os
from pathlib import Path

from django.core.management.base import CommandError

from mcpgate.claude import config as claudeconfig
from mcpgate.claude import files
from mcpgate.claude.files import Planned

SETTINGS = ".claude/settings.json"
LOCAL_SETTINGS = ".claude/settings.local.json"
MCP = ".mcp.json"
SKILL = ".claude/skills/salon/SKILL.md"


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


def git_dir(here: Path) -> Path | None:
    """The repository's git directory (a worktree's shares the main one's info/)."""
    dot_git = here / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        line = dot_git.read_text(errors="replace").strip()
        if line.startswith("gitdir:"):
            gitdir = (here / line[len("gitdir:") :].strip()).resolve()
            common = gitdir / "commondir"
            if common.is_file():
                return (gitdir / common.read_text().strip()).resolve()
            return gitdir
    return None


def exclude_plan(here: Path, ours: list[str], *, add: bool) -> Planned | None:
    """The repository's own `.git/info/exclude` with (add) or without the lines `ours`
    (a note, then the paths of files that name this machine's paths); None when the
    project is no git repository or nothing changes."""
    info = git_dir(here)
    if info is None:
        return None
    path = info / "info" / "exclude"
    label = ".git/info/exclude"
    old = files.read_bytes(path, label)
    lines = (old or b"").decode(errors="replace").splitlines()
    kept = [line for line in lines if line not in ours]
    if add:
        kept += ours
    new = ("\n".join(kept) + "\n").encode() if kept else None
    if old is not None and new is None:
        new = b""
    if new == old or (old is None and not add):
        return None
    return Planned(path, label, old, new)


def refuse_unwritable(plans: list[Planned], here: Path) -> None:
    """Refuse, before anything is written, a file (or its backup) whose folder cannot be
    made or written (`~/.codex` a plain file, say): otherwise the files before it would
    be written and it not."""
    for plan in plans:
        if not plan.changed:
            continue
        targets = [plan.path]  # written or removed: its folder changes
        if plan.old is not None and plan.backed_up:
            targets.append(files.backup_path(plan.path, here))
        for target in targets:
            folder = target.parent
            while not folder.exists() and folder != folder.parent:
                folder = folder.parent
            if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
                raise CommandError(
                    f"cannot write {plan.label}: {folder} is not a folder salon can write "
                    "in; nothing was changed"
                )


def uninstall_client(client: str, name: str, here: Path, plans: list[Planned], folder: Path,
                     *, dry_run: bool) -> str:  # fmt: skip
    """`salon uninstall --client CLIENT`'s work once its plans are made: every folder
    checked, the plans applied (not on a dry run), `folder` removed when left empty, and
    the report. `name`: the client as the report names it."""
    refuse_unwritable(plans, here)
    if not dry_run:
        for plan in plans:
            files.apply(plan, cwd=here)
        if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
    changed = [plan for plan in plans if plan.changed]
    dry = " (dry run: nothing changed)" if dry_run else ""
    head = f"salon uninstall --client {client}{dry}: {here}"
    if not changed:
        return f"{head}\n  nothing of agent-salon's for {name} was found here"
    return "\n".join([head, *file_lines(changed, here, dry_run)])
