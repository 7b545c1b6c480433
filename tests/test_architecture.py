"""The house's arrows point one way: the domain (bus/) stands alone, the daemon
(salon/daemon/) sits on it, the adapters (mcpgate/, relay/) on both, the project (the
rest of salon/) on top, and no package imports back.

Read from the source with `ast`, every import counts — those inside functions too.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The rooms of the house; the daemon is a room of its own inside salon/.
PACKAGES = ("bus", "salon.daemon", "mcpgate", "relay", "salon")
DAEMON = "salon.daemon"
# Where the project wires the MCP adapter in: its URLs, its ASGI application, and the
# command line (`salon mcp` and `salon hook` start the adapter's own entry points).
PROJECT_WIRING = {"salon/urls.py", "salon/asgi.py", "salon/cli.py"}


def room_of(module: str, names: list[str] = ()) -> list[str]:
    """The rooms a module name (and, for `from salon import x`, its names) belongs to."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return []
    if parts[0] == "salon":
        if parts[1:2] == ["daemon"]:
            return [DAEMON]
        if len(parts) == 1 and names:
            return [DAEMON if name == "daemon" else "salon" for name in names]
    return [parts[0]]


def imports_of(path: Path) -> set[str]:
    """The rooms of this repository that a file imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.update(room_of(alias.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.update(room_of(node.module, [alias.name for alias in node.names]))
    return found


def files_of(room: str) -> list[Path]:
    files = sorted((REPO / room.replace(".", "/")).rglob("*.py"))
    if room == "salon":
        files = [path for path in files if not path.is_relative_to(REPO / "salon" / "daemon")]
    return files


def package_graph() -> dict[str, dict[str, list[str]]]:
    """room → {imported room: [the files that import it]}."""
    graph: dict[str, dict[str, list[str]]] = {package: {} for package in PACKAGES}
    for package in PACKAGES:
        for path in files_of(package):
            for target in imports_of(path) - {package}:
                graph[package].setdefault(target, []).append(str(path.relative_to(REPO)))
    return graph


def test_the_domain_imports_nothing_above_it():
    arrows = package_graph()["bus"]
    assert arrows == {}, f"bus/ reaches up: {arrows}"


def test_the_daemon_imports_only_the_domain():
    arrows = package_graph()[DAEMON]
    assert set(arrows) <= {"bus"}, f"salon/daemon/ reaches into an adapter or up: {arrows}"


def test_relay_and_mcpgate_do_not_import_each_other():
    graph = package_graph()
    assert "mcpgate" not in graph["relay"], graph["relay"]["mcpgate"]
    assert "relay" not in graph["mcpgate"], graph["mcpgate"]["relay"]


def test_the_project_imports_mcpgate_only_to_wire_it_in():
    importers = set(package_graph()["salon"].get("mcpgate", []))
    assert importers <= PROJECT_WIRING, sorted(importers - PROJECT_WIRING)


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
    sample.write_text("def later():\n    from salon import cli\n    import mcpgate.tools\n")

    assert imports_of(sample) == {"salon", "mcpgate"}


def test_the_checker_tells_the_daemon_from_the_rest_of_salon(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from salon import daemon\nfrom salon.daemon.line import Line\n")
    assert imports_of(sample) == {DAEMON}

    sample.write_text("from salon import config, daemon\n")
    assert imports_of(sample) == {"salon", DAEMON}
