"""Every reach into a third-party library's internals, one module per library.

A subclass overriding a private method, an attribute set on another library's object, a
class swapped under a live object, a compiler driven by hand: each was measured to pay
(its module's docstring has the numbers) and each can break silently on an upgrade. So
they live here, and only here, each module with WRITTEN_FOR: the versions of each
library it reaches into that it was written and tested for, as (lowest, first one not
covered). tests/test_patches.py fails, naming the module and what to do, when an
installed version falls outside a range.

A top-level package, not a folder of salon/: bus/ reaches into Django's compiler
(patches.django), and bus/ imports nothing of the packages above it. This package
imports none of the project's (tests/test_architecture.py), so every layer may import
it.
"""

from __future__ import annotations

import re
from importlib import metadata


def release(version: str) -> tuple[int, ...]:
    """The numbers a version starts with: "4.2.3" → (4, 2, 3); "5.2rc1" → (5, 2)."""
    found = re.match(r"\d+(?:\.\d+)*", version)
    if found is None:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(part) for part in found.group().split("."))


def out_of_range(module: str, written_for: dict[str, tuple[str, str]], installed=None) -> list[str]:
    """What is wrong with a patch module's WRITTEN_FOR against the installed libraries
    (or `installed`: library → version), one sentence each; [] when all are in range."""
    problems = []
    for library, (lowest, beyond) in written_for.items():
        version = (installed or {}).get(library) or metadata.version(library)
        if not release(lowest) <= release(version) < release(beyond):
            problems.append(
                f"{library} {version} is installed, but {module} was written for {library} "
                f">={lowest},<{beyond}: read each of its overrides against {library} "
                f"{version}'s source, run its tests and re-measure its gain, then widen "
                "WRITTEN_FOR (or drop the patch)"
            )
    return problems
