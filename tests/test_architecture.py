"""The house's arrows point one way: the domain (bus/) stands alone, the adapters
(mcpgate/, relay/) sit on it, the project (salon/) on top, and no package imports back.
Under them all, the library patches (patches/) import nothing of the house.

Read from the source with `ast`, every import counts — those inside functions too.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("bus", "mcpgate", "patches", "relay", "salon")


def imports_of(path: Path) -> set[str]:
    """The top-level packages of this repository that a file imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update(name.split(".")[0] for name in names if name.split(".")[0] in PACKAGES)
    return found


def package_graph() -> dict[str, dict[str, list[str]]]:
    """package → {imported package: [the files that import it]}."""
    graph: dict[str, dict[str, list[str]]] = {package: {} for package in PACKAGES}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for target in imports_of(path) - {package}:
                graph[package].setdefault(target, []).append(str(path.relative_to(REPO)))
    return graph


def test_the_domain_imports_nothing_above_it():
    arrows = package_graph()["bus"]
    arrows.pop("patches", None)  # below it, not above
    assert arrows == {}, f"bus/ reaches up: {arrows}"


def test_the_library_patches_import_nothing_of_the_house():
    arrows = package_graph()["patches"]
    assert arrows == {}, f"patches/ reaches into the house: {arrows}"


def test_no_import_circle_exists_between_packages():
    graph = package_graph()
    circles = []

    def visit(package: str, path: list[str]) -> None:
        for target in graph[package]:
            if target in path:
                circles.append([*path[path.index(target) :], target])
            else:
                visit(target, [*path, target])

    for package in PACKAGES:
        visit(package, [package])
    assert circles == [], {
        " -> ".join(circle): {a: graph[a][b] for a, b in itertools.pairwise(circle)}
        for circle in circles
    }


def test_the_checker_sees_an_import_inside_a_function(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def later():\n    from salon import cli\n    import mcpgate.local\n")

    assert imports_of(sample) == {"salon", "mcpgate"}
