"""`salon install --client gemini ROOM[,ROOM…]` and `salon uninstall --client gemini`.

Run in a project; wires Gemini CLI's sessions there to the bus for this agent
(AGENT_SALON_NAME, else the name of the project's top directory — the git root). What is
written (mcpgate.gemini.config has the shapes):

* the project's `.gemini/settings.json`: our five hooks and the MCP server `salon` merged
  in, every other key of the file kept;
* the user's `~/.gemini/trustedFolders.json`: the project trusted, when nothing trusts it
  yet — and a note in the data directory that salon added that entry, so uninstall takes
  out only what install put in;
* the rooms and the store's migrations, and the project's directory for the agent, as
  for Claude Code (mcpgate.claude.install).

With this installation's `salon` on PATH and the default store, the commands are plain
`salon …` and `.gemini/settings.json` can be committed; otherwise it names this
machine's paths and is listed in the repository's own `.git/info/exclude`, as for Codex.
The same promises as the other installs: everything read and checked first (a file that
is not JSON, or not in the shape Gemini reads, is refused and nothing is changed; so is a
project the user marked untrusted), a re-run changes nothing, each changed file backed
up first, no write through a symbolic link; uninstall gives each file its own bytes back
and removes what install created: `git status` is as it was before.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from mcpgate import clients
from mcpgate.claude import config as claudeconfig
from mcpgate.claude import files, install
from mcpgate.claude.files import Planned
from mcpgate.claude.plans import (
    exclude_plan,
    file_lines,
    json_plan,
    shown_path,
    uninstall_client,
)
from mcpgate.codex.config import project_root
from mcpgate.gemini import config as geminiconfig
from mcpgate.gemini.config import SETTINGS

EXCLUDE_NOTE = "# agent-salon: salon install --client gemini (names this machine's paths)"
EXCLUDED = [EXCLUDE_NOTE, f"/{SETTINGS}"]


def agent_for(here: Path, named: str) -> str:
    return named or project_root(here).name


def notes_path() -> Path:
    """Where install notes the projects whose trust it added (the data directory)."""
    return settings.USER_DATA_DIR / "gemini-trusted-folders.json"


# ---------------------------------------------------------------- install


def project(agent: str, rooms: list[str], *, dry_run: bool, replace: bool) -> str:
    here = project_root(Path.cwd())
    wired = clients.wiring(geminiconfig.CLIENT, geminiconfig.KINDS, agent, rooms)
    server = geminiconfig.server_entry(wired.server_argv, wired.server_env)
    plans = [settings_plan(here, wired.commands, server, replace=replace),
             *trust_plans(here, add=True)]  # fmt: skip
    pending, room_states = clients.finish(agent, here, rooms, plans, EXCLUDED,
                                          exclude=bool(wired.why), dry_run=dry_run)  # fmt: skip
    return report(agent, here, rooms, plans, room_states, pending, dry_run, why=wired.why)


def settings_plan(here: Path, commands: dict[str, str], server: dict, *, replace) -> Planned:
    files.refuse_links(here, here / SETTINGS, SETTINGS)
    old, data = files.read_json(here / SETTINGS, SETTINGS)
    try:
        merged = geminiconfig.merge_settings(data, commands, server, replace=replace)
    except claudeconfig.ShapeError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None
    return json_plan(here / SETTINGS, SETTINGS, old, merged)


def _json_bytes(data: dict, old: bytes | None) -> bytes | None:
    return files.dump_like(data, old) if data else None


def trust_plans(here: Path, *, add: bool) -> list[Planned]:
    """The user's trustedFolders.json with the project trusted (add: unless something
    trusts it already) or without the entry install added; and install's note of it."""
    path = geminiconfig.trusted_folders_path()
    label = shown_path(path, here)
    files.refuse_links(path.parent.parent, path, label)
    old, folders = files.read_json(path, label)
    if not isinstance(folders, dict) or not all(isinstance(v, str) for v in folders.values()):
        raise CommandError(f"{label} is not in the shape Gemini reads; nothing was changed")
    note_old, ours = _noted()
    key = str(here)
    new_folders, new_ours = dict(folders), [p for p in ours if p != key]
    if add:
        trust = geminiconfig.trust_of(folders, here)
        if trust == geminiconfig.UNTRUSTED:
            raise CommandError(
                f"{label} marks {here} as {trust} for Gemini CLI, so Gemini would not read "
                "the project's .gemini/settings.json, its server or its hooks: trust the "
                "folder in Gemini (or remove that entry) and run install again (nothing was "
                "changed)"
            )
        if trust is None or key in ours:
            new_folders[key] = geminiconfig.TRUSTED
            new_ours.append(key)
    elif key in ours and folders.get(key) == geminiconfig.TRUSTED:
        del new_folders[key]
    changed = new_folders != folders
    new = _json_bytes(new_folders, old) if changed else old
    plan = Planned(path, f"{label} (Gemini trusted folders)", old, new)
    plan.private = True
    if not add and changed:
        plan = _undone(plan, here)
    note_new = note_old
    if sorted(new_ours) != sorted(ours):
        note_new = _json_bytes({"folders": new_ours}, note_old) if new_ours else None
    note = Planned(notes_path(), "gemini-trusted-folders.json (salon's note)", note_old, note_new)
    note.private = True
    return [plan, note] if note.changed else [plan]


def _noted() -> tuple[bytes | None, list[str]]:
    """Install's note (its bytes, the folders it lists); a link there, or a note not in
    the shape install writes, is refused."""
    path, label = notes_path(), "gemini-trusted-folders.json"
    files.refuse_links(path.parent, path, label)
    raw, noted = files.read_json(path, label)
    listed = noted.get("folders", []) if isinstance(noted, dict) else None
    if not isinstance(listed, list):
        raise CommandError(
            f"{path} (salon's note of the folders it trusted) is not in the shape salon "
            "writes; nothing was changed: move it away and run the command again"
        )
    return raw, [str(p) for p in listed if isinstance(p, str)]


def _undone(plan: Planned, here: Path) -> Planned:
    from mcpgate.claude import uninstall

    return uninstall.undone(plan, here)


def report(agent, here, rooms, plans, room_states, pending, dry_run, *, why) -> str:
    lines = [
        f"salon install --client gemini{' (dry run: nothing written)' if dry_run else ''}: "
        f"agent {agent} in {here}, rooms {', '.join(rooms)}",
        *file_lines(plans, here, dry_run),
        *install.store_lines(rooms, room_states, pending, dry_run),
        f"  MCP server {geminiconfig.SERVER_NAME}: stdio (salon mcp), trusted, in {SETTINGS}",
    ]
    if why:
        lines.append(
            f"  note: the commands name this machine's paths ({why}), so {SETTINGS} is "
            "listed in .git/info/exclude: keep it out of version control. With this "
            "`salon` on PATH and the default store, install writes a file to commit instead"
        )
    lines += [
        "Next:",
        f"  start Gemini CLI in {here} with: gemini   (or `gemini -p …`)",
        "  Gemini warns once about the project's new hooks; the folder is trusted, so it "
        "runs them and the server",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- uninstall


def uninstall(*, dry_run: bool) -> str:
    here = project_root(Path.cwd())
    plans = uninstall_plans(here)
    return uninstall_client("gemini", "Gemini CLI", here, plans, here / ".gemini", dry_run=dry_run)


def uninstall_plans(here: Path) -> list[Planned]:
    files.refuse_links(here, here / SETTINGS, SETTINGS)
    old, data = files.read_json(here / SETTINGS, SETTINGS)
    try:
        merged = geminiconfig.without_ours(data)
    except claudeconfig.ShapeError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None
    plans = [_undone(json_plan(here / SETTINGS, SETTINGS, old, merged), here)]
    plans += trust_plans(here, add=False)
    exclude = exclude_plan(here, EXCLUDED, add=False)
    if exclude is not None:
        plans.append(exclude)
    return plans
