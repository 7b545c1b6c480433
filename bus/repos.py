"""Which git repository a path is in, the way claims name it: by the repository's common
directory (the `.git` directory every worktree of it shares), and the path relative to
the top of the working tree it is in.

Standard library only, and no `git` process: the PreToolUse hook asks this on every edit.
A `.git` directory is a repository's own; a `.git` file (`gitdir: …`) is a worktree's or a
submodule's, whose git directory holds `commondir` when it is a linked worktree.
"""

from __future__ import annotations

import os

MAX_GITFILE_BYTES = 4096


class Place:
    """A path inside a repository: `common` (the real path of its common directory),
    `top` (its working tree's top), `relative` (the path below `top`, `/`-separated; "" for
    the top itself)."""

    __slots__ = ("common", "relative", "top")

    def __init__(self, common: str, top: str, relative: str):
        self.common, self.top, self.relative = common, top, relative

    def __repr__(self) -> str:
        return f"Place({self.common!r}, {self.top!r}, {self.relative!r})"


def _gitdir_of_file(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_GITFILE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    first = text.strip().splitlines()[0] if text.strip() else ""
    if not first.startswith("gitdir:"):
        return None
    target = first[len("gitdir:") :].strip()
    return os.path.normpath(os.path.join(os.path.dirname(path), target))


def common_dir(dotgit: str) -> str | None:
    """The common directory of the repository whose `.git` (directory or file) this is."""
    if os.path.isdir(dotgit):
        gitdir = dotgit
    else:
        gitdir = _gitdir_of_file(dotgit)
        if gitdir is None or not os.path.isdir(gitdir):
            return None
    try:
        with open(os.path.join(gitdir, "commondir"), "rb") as handle:
            pointer = handle.read(MAX_GITFILE_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        pointer = ""
    if pointer:
        gitdir = os.path.normpath(os.path.join(gitdir, pointer))
    return os.path.realpath(gitdir)


def locate(path: str, cwd: str | None = None) -> Place | None:
    """The repository `path` is in (relative paths are read from `cwd`), or None. The
    path need not exist (a Write makes a new file): the nearest directory that does is
    where the search starts."""
    base = cwd or os.getcwd()
    if "\0" in base or "\0" in path:
        return None  # no file system path holds a NUL (a hook input's cwd may)
    full = os.path.realpath(os.path.join(base, path))
    probe = full
    while not os.path.isdir(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent
    while True:
        dotgit = os.path.join(probe, ".git")
        if os.path.lexists(dotgit):
            common = common_dir(dotgit)
            if common is None:
                return None
            relative = os.path.relpath(full, probe)
            relative = "" if relative == "." else relative.replace(os.sep, "/")
            return Place(common, probe, relative)
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent
