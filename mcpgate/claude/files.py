"""Reading and writing Claude Code's configuration files for `salon install` and `salon
uninstall`, with care: strict JSON in, atomic writes out, never through a symbolic link,
the file's mode kept, one `<file>.bak` per changed file.

The files:

* the project's own: `.claude/settings.json`, `.mcp.json` and the skill (meant to be
  committed), `.claude/settings.local.json` (personal: Claude Code keeps it out of git);
  their backups are kept in the user's data directory (backup_path), never in the project;
* Claude Code's user configuration, `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`
  when that is set), whose `projects[<project>].mcpServers` is the *local* MCP scope:
  servers only this person sees in this project. `<project>` is the git root of the
  directory (of the main checkout, for a worktree), else the directory, symbolic links
  resolved — what Claude Code itself keys it by (seen with `claude mcp add-json --scope
  local` run in a subdirectory and in a worktree).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.core.management.base import CommandError

from bus import strict


@dataclass
class Planned:
    """One file: what is there, what should be there, and what happened.

    `new` None: the file is to be removed. `claude` set: the change is made by running
    these `claude` command lines (in the project) instead of writing `new` ourselves."""

    path: Path
    label: str
    old: bytes | None  # None: the file does not exist
    new: bytes | None
    removed: list[str] = field(default_factory=list)
    backup: Path | None = None
    claude: list[list[str]] = field(default_factory=list)
    backed_up: bool = True  # False: no `.bak` (a generated file of ours)
    private: bool = False  # a new file is made 0600 (the user's own configuration)

    @property
    def changed(self) -> bool:
        return self.old != self.new


def refuse_links(root: Path, path: Path, label: str) -> None:
    """Refuse a symbolic link at `path` or at any directory between `root` and it."""
    here = root
    for part in path.relative_to(root).parts:
        here = here / part
        if here.is_symlink():
            target = os.readlink(here)
            shown = here.relative_to(root) if here != root else here
            raise CommandError(
                f"{shown} is a symbolic link (to {strict.shown(target, 100)}); "
                f"salon does not write through links, so {label} was left untouched and "
                "nothing was changed: edit the file it points to yourself, or replace the "
                "link with a copy, and run the command again"
            )


def read_bytes(path: Path, label: str) -> bytes | None:
    if not path.exists():
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read {label}: {exc}; nothing was changed") from None


def read_json(path: Path, label: str) -> tuple[bytes | None, dict]:
    raw = read_bytes(path, label)
    if raw is None or not raw.strip():
        return raw, {}
    try:
        return raw, strict.decode_json(raw)
    except strict.NotJson as exc:
        raise CommandError(
            f"{label} is not valid JSON ({exc}); it was left untouched and nothing was "
            "changed — fix the file (or move it away) and run the command again"
        ) from None


def indent_of(raw: bytes | None) -> int | str:
    """The indentation a JSON file is written with (its first indented line), so that a
    rewrite changes only what it must; 2 (Claude Code's own) when there is none."""
    if raw:
        for line in raw.decode(errors="replace").splitlines()[1:]:
            stripped = line.lstrip(" \t")
            if stripped and stripped != line:
                lead = line[: len(line) - len(stripped)]
                return "\t" if lead.startswith("\t") else len(lead)
    return 2


def _dumps(data: object, **style) -> str:
    # allow_nan=False: never write NaN or Infinity (not JSON; Claude Code could not read
    # the file). Input holding them is refused when it is read (bus.strict).
    return json.dumps(data, allow_nan=False, **style)


def dump_like(data: dict, raw: bytes | None) -> bytes:
    """`data` as JSON written the way the file `raw` is (its indentation, or all on one
    line with its own spacing, its escapes, its last newline), so that what a rewrite
    does not change stays byte for byte: git shows only the lines that did change. A new
    file: indented by 2, as Claude Code writes its own."""
    text = raw.decode(errors="replace") if raw else ""
    body = text.strip()
    if not body:
        return (_dumps(data, indent=2, ensure_ascii=False) + "\n").encode()
    end = text[len(text.rstrip()) :]
    one_line = "\n" not in body
    styles = []
    for ascii_only in (False, True):
        if one_line:
            for items in (", ", ","):
                for keys in (": ", ":"):
                    styles.append({"separators": (items, keys), "ensure_ascii": ascii_only})
        else:
            styles.append({"indent": indent_of(raw), "separators": (",", ": "),
                           "ensure_ascii": ascii_only})  # fmt: skip
    try:
        before = strict.decode_json(raw)
    except strict.NotJson:
        before = None
    # The style that writes the file's own content back exactly, else the closest guess.
    chosen = next((style for style in styles if _dumps(before, **style) == body), None)
    if chosen is None:
        chosen = styles[0]
        if one_line:
            chosen["separators"] = (", " if ", " in body else ",", ": " if '": ' in body else ":")
    return (_dumps(data, **chosen) + end).encode()


def same_json(raw: bytes | None, data: object) -> bool:
    """Whether the file `raw` holds exactly `data` (true stays true, 1 stays 1)."""
    if not raw or not raw.strip():
        return False
    try:
        held = strict.decode_json(raw)
    except strict.NotJson:
        return False
    return _dumps(held, sort_keys=True) == _dumps(data, sort_keys=True)


def backup_path(path: Path, project: Path) -> Path:
    """Where the copy of `path` is kept before it is changed. A file of the project goes to
    the user's data directory (`backups/<project>-<hash of its path>/<file>.bak`): beside
    it, git would list the copy as an untracked file and `git add -A` would commit it.
    Any other file (`~/.claude.json`) is copied beside itself."""
    try:
        relative = path.relative_to(project)
    except ValueError:
        return path.with_name(f"{path.name}.bak")
    from django.conf import settings

    where = str(project.resolve())
    folder = f"{project.name}-{hashlib.sha256(where.encode()).hexdigest()[:8]}"
    return settings.USER_DATA_DIR / "backups" / folder / relative.with_name(f"{path.name}.bak")


def write_atomically(path: Path, data: bytes, mode: int) -> None:
    """`data` into a new file beside `path`, created exclusively (mkstemp: never an
    existing file, never through a link), given `mode`, synced, then renamed over `path`
    (which replaces a link there, never what it points to). A reader sees the old file
    or the new one, never half of one."""
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".salon-tmp"
    )
    try:
        os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def new_file_mode() -> int:
    """What a plain `open(path, "w")` would give a new file: 0666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def back_up(plan: Planned, project: Path) -> None:
    """The file's present content into its `.bak` (backup_path: one per file, replaced
    each time), no looser than the file itself."""
    if plan.old is None or not plan.backed_up:
        return
    mode = stat.S_IMODE(plan.path.lstat().st_mode)
    plan.backup = backup_path(plan.path, project)
    plan.backup.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomically(plan.backup, plan.old, mode)


def apply(plan: Planned, *, cwd: Path) -> None:
    """Make the planned change: write, remove, or run `claude` for it."""
    if not plan.changed:
        return
    try:
        back_up(plan, cwd)
        if plan.claude:
            for argv in plan.claude:
                run_claude(argv, cwd=cwd)
        elif plan.new is None:
            plan.path.unlink()
        else:
            plan.path.parent.mkdir(parents=True, exist_ok=True)
            if plan.old is not None:
                mode = stat.S_IMODE(plan.path.lstat().st_mode)
            else:  # a new file of the user's own configuration is the user's alone
                mode = 0o600 if plan.private else new_file_mode()
            write_atomically(plan.path, plan.new, mode)
    except OSError as exc:
        raise CommandError(f"cannot write {plan.label}: {exc}") from None


# ---------------------------------------------------------------- the local MCP scope


def user_config_path(environ: dict[str, str] | None = None) -> Path:
    """Claude Code's user configuration file: `$CLAUDE_CONFIG_DIR/.claude.json`, else
    `~/.claude.json`."""
    environ = os.environ if environ is None else environ
    directory = environ.get("CLAUDE_CONFIG_DIR", "").strip()
    if directory:
        return Path(directory).expanduser() / ".claude.json"
    return Path(environ.get("HOME") or Path.home()) / ".claude.json"


def project_key(directory: Path) -> str:
    """The key of `directory` in the user configuration's `projects`, as Claude Code
    makes it: the git root (the main checkout's, for a worktree), else the directory."""
    here = directory.resolve()
    for candidate in (here, *here.parents):
        dot_git = candidate / ".git"
        if dot_git.is_dir():
            return str(candidate)
        if dot_git.is_file():
            return str(_main_checkout(candidate, dot_git) or candidate)
    return str(here)


def _main_checkout(candidate: Path, dot_git: Path) -> Path | None:
    """A worktree's `.git` file says `gitdir: <main>/.git/worktrees/<name>`, whose
    `commondir` names `<main>/.git`."""
    try:
        line = dot_git.read_text().strip()
        if not line.startswith("gitdir:"):
            return None
        gitdir = (candidate / line[len("gitdir:") :].strip()).resolve()
        common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
    except OSError:
        return None
    return common.parent if common.name == ".git" else None


def claude_on_path() -> str | None:
    return shutil.which("claude")


def run_claude(argv: list[str], *, cwd: Path) -> None:
    """`claude ARGS` in the project (Claude Code's own way to change its configuration,
    which it keeps consistent with its running sessions); a failure stops everything."""
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandError(f"`{' '.join(argv[:4])} …` failed: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise CommandError(
            f"`{' '.join(argv[:4])} …` failed (exit {done.returncode}): "
            f"{strict.shown(said[-1] if said else '', 300)}"
        )
