"""`salon install --client codex ROOM[,ROOM…]` and `salon uninstall --client codex`.

Run in a project; wires Codex CLI's sessions there to the bus for this agent
(AGENT_SALON_NAME, else the name of the project's top directory — the git root — so a
session started in a subdirectory is the same agent). What is written (mcpgate.codex
.config has the shapes):

* the project's `.codex/hooks.json` (our five hooks merged in, every other hook kept) and
  `.codex/config.toml` (the MCP server `salon`, every other table kept byte for byte);
* the user's Codex configuration (`$CODEX_HOME/config.toml`, else `~/.codex/config.toml`):
  the project trusted, when it is not yet, and each hook of ours trusted by its hash;
* the rooms and the store's migrations, and the project's directory for the agent, as
  for Claude Code (mcpgate.claude.install).

With this installation's `salon` on PATH and the default store, the commands are plain
`salon …` and the project's two files can be committed. Otherwise they name this
machine's paths: Codex has no personal file in a project, so both are listed in the
repository's own `.git/info/exclude` (never in a committed `.gitignore`), and the
report says so.

The same promises as the Claude Code install: everything read and checked before
anything is written (a file that is not JSON / TOML, or not in the shape Codex reads, is
refused, naming it, and nothing is changed); a re-run changes nothing; each changed file
is backed up first (a project file's copy in the data directory, the user's config
beside itself); writes never follow a symbolic link. Uninstall removes exactly what
install added — a table of ours in a TOML file carries the comment `# agent-salon` —,
gives a file its own bytes back when its backup holds what is left, removes a file left
empty and the `.codex` folder left empty: `git status` is as it was before.
"""

from __future__ import annotations

from pathlib import Path

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
from mcpgate.codex import config as codexconfig
from mcpgate.codex import tomledit
from mcpgate.codex.config import CONFIG, HOOKS

EXCLUDE_NOTE = "# agent-salon: salon install --client codex (names this machine's paths)"
EXCLUDED = [EXCLUDE_NOTE, f"/{CONFIG}", f"/{HOOKS}"]
NEXT_STEP = "codex"


def agent_for(here: Path, named: str) -> str:
    return named or codexconfig.project_root(here).name


# ---------------------------------------------------------------- install


def project(agent: str, rooms: list[str], *, dry_run: bool, replace: bool) -> str:
    here = codexconfig.project_root(Path.cwd())
    wired = clients.wiring(codexconfig.CLIENT, codexconfig.KINDS, agent, rooms)
    server = codexconfig.server_table(wired.server_argv, wired.server_env)
    plans = project_plans(here, wired.commands, server, replace=replace)
    pending, room_states = clients.finish(agent, here, rooms, plans, EXCLUDED,
                                          exclude=bool(wired.why), dry_run=dry_run)  # fmt: skip
    return report(agent, here, rooms, plans, room_states, pending, dry_run, why=wired.why)


def project_plans(here: Path, commands: dict[str, str], server: dict, *, replace) -> list:
    for label in (CONFIG, HOOKS):
        files.refuse_links(here, here / label, label)
    old_hooks, hooks_data = files.read_json(here / HOOKS, HOOKS)
    try:
        hooks = codexconfig.merge_hooks(hooks_data, commands, replace=replace)
    except claudeconfig.ShapeError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None
    plans = [json_plan(here / HOOKS, HOOKS, old_hooks, hooks)]
    path = here / CONFIG
    old = files.read_bytes(path, CONFIG)
    text = _edited(old, CONFIG, set_tables=[(("mcp_servers", codexconfig.SERVER_NAME), server)])
    plans.append(Planned(path, CONFIG, old, text))
    plans.append(user_plan(here, hooks.data, add=True))
    return plans


def _edited(old: bytes | None, label: str, **change) -> bytes:
    try:
        text = old.decode() if old is not None else ""
        return tomledit.edit(text, label, **change).encode()
    except UnicodeDecodeError:
        raise CommandError(f"{label} is not UTF-8 text; nothing was changed") from None
    except tomledit.TomlEditError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None


def user_plan(here: Path, hooks_data: dict, *, add: bool) -> Planned:
    """The user's Codex config: the project's trust and our hooks' (add), or neither."""
    path = codexconfig.codex_home() / "config.toml"
    label = shown_path(path, here)
    files.refuse_links(path.parent.parent, path, label)
    old = files.read_bytes(path, label)
    text = old.decode(errors="replace") if old is not None else ""
    data = _loads(text, label) if text.strip() else {}
    hooks_path = here / HOOKS
    trusted = codexconfig.trust_entries(hooks_path, hooks_data) if add else {}
    ours = set(tomledit.marked_tables(text))
    # Ours for hooks of this file that are no more (or all of them, on uninstall).
    remove = [
        table
        for table in ours
        if table[:2] == ("hooks", "state")
        and len(table) == 3
        and table[2].startswith(f"{hooks_path}:")
        and table[2] not in trusted
    ]
    project_path = ("projects", str(here))
    if not add and project_path in ours:
        remove.append(project_path)
    tables = trust_tables(here, data, ours, trusted, label) if add else []
    new = _edited(old, label, set_tables=tables, remove=remove)
    if old is None and not tables:
        new = None
    plan = Planned(path, f"{label} (Codex user config)", old, new)
    plan.private = True
    return plan


def trust_tables(here: Path, data: dict, ours: set, trusted: dict[str, str], label: str):
    """The project trusted (unless it is already, by the user), each hook of ours trusted
    (an `enabled` the user set is kept)."""
    tables = []
    project_path = ("projects", str(here))
    trust = _table(data, label, "projects", str(here)).get("trust_level")
    if trust is None or project_path in ours:
        tables.append((project_path, {"trust_level": "trusted"}))
    elif trust != "trusted":
        raise CommandError(
            f"{label} marks {here} as {trust!r} for Codex, so Codex would not read the "
            "project's .codex/ files: trust the project in Codex (or remove that entry) "
            "and run install again (nothing was changed)"
        )
    for key, digest in trusted.items():
        state = _table(data, label, "hooks", "state", key)
        kept = {k: v for k, v in state.items() if k != "trusted_hash"}
        tables.append((("hooks", "state", key), {**kept, "trusted_hash": digest}))
    return tables


def _loads(text: str, label: str) -> dict:
    try:
        return tomledit.loads(text, label)
    except tomledit.TomlEditError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None


def _table(data: dict, label: str, *path: str) -> dict:
    """The table at `path` ({} when it is not there); refused when something on the way
    is not a table (Codex would not read the file)."""
    here: object = data
    for depth, part in enumerate(path, 1):
        here = here.get(part, {})
        if not isinstance(here, dict):
            shown = ".".join(tomledit.key(p) for p in path[:depth])
            raise CommandError(
                f"{label}: {shown} is not a table, so it is not in the shape Codex reads; "
                "it was left untouched and nothing was changed"
            )
    return here


def report(agent, here, rooms, plans, room_states, pending, dry_run, *, why) -> str:
    lines = [
        f"salon install --client codex{' (dry run: nothing written)' if dry_run else ''}: "
        f"agent {agent} in {here}, rooms {', '.join(rooms)}",
        *file_lines(plans, here, dry_run),
        *install.store_lines(rooms, room_states, pending, dry_run),
        f"  MCP server {codexconfig.SERVER_NAME}: stdio (salon mcp), in {CONFIG}",
    ]
    if why:
        lines.append(
            f"  note: the commands name this machine's paths ({why}), so {CONFIG} and "
            f"{HOOKS} are listed in .git/info/exclude: keep them out of version control. "
            "With this `salon` on PATH and the default store, install writes files to "
            "commit instead"
        )
    lines += [
        "Next:",
        f"  start Codex in {here} with: {NEXT_STEP}   (or `codex exec …`)",
        "  Codex runs the hooks and the server only in a trusted project: install trusted "
        "this one and its hooks in your Codex config (they show as trusted in /hooks)",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- uninstall


def uninstall(*, dry_run: bool) -> str:
    here = codexconfig.project_root(Path.cwd())
    plans = uninstall_plans(here)
    return uninstall_client("codex", "Codex", here, plans, here / ".codex", dry_run=dry_run)


def uninstall_plans(here: Path) -> list[Planned]:
    for label in (CONFIG, HOOKS):
        files.refuse_links(here, here / label, label)
    old_hooks, hooks_data = files.read_json(here / HOOKS, HOOKS)
    try:
        hooks = codexconfig.without_our_hooks(hooks_data)
    except claudeconfig.ShapeError as exc:
        raise CommandError(f"{exc}; it was left untouched and nothing was changed") from None
    plans = [_undone_json(json_plan(here / HOOKS, HOOKS, old_hooks, hooks), here)]
    path = here / CONFIG
    old = files.read_bytes(path, CONFIG)
    if old is not None:
        text = old.decode(errors="replace")
        data = _loads(text, CONFIG)
        server = _table(data, CONFIG, "mcp_servers").get(codexconfig.SERVER_NAME)
        path_ = ("mcp_servers", codexconfig.SERVER_NAME)
        if path_ in tomledit.marked_tables(text) or codexconfig.is_our_server(server):
            new = _edited(old, CONFIG, remove=[path_])
            plans.append(_undone_toml(Planned(path, CONFIG, old, new), here))
    plans.append(_undone_toml(user_plan(here, {}, add=False), here))
    exclude = exclude_plan(here, EXCLUDED, add=False)
    if exclude is not None:
        plans.append(exclude)
    return plans


def _undone_json(plan: Planned, here: Path) -> Planned:
    from mcpgate.claude import uninstall

    return uninstall.undone(plan, here)


def _undone_toml(plan: Planned, here: Path) -> Planned:
    """The file's own bytes back when its backup holds what is left; none left: removed."""
    if not plan.changed or plan.new is None:
        return plan
    left = plan.new.decode(errors="replace")
    earlier = files.read_bytes(files.backup_path(plan.path, here), plan.label)
    if earlier is not None:
        try:
            if tomledit.loads(earlier.decode(), plan.label) == tomledit.loads(left, plan.label):
                plan.new = earlier
                return plan
        except (UnicodeDecodeError, tomledit.TomlEditError):
            pass
    if not left.strip():
        plan.new = None
    return plan
