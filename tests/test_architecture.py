"""The house's arrows point one way: the domain (bus/) stands alone, the daemon
(salon/daemon/) sits on it, the adapters (mcpgate/, relay/) on both, the project (the
rest of salon/) on top, and no package imports back. Under them all, the library
patches (patches/) import nothing of the house.

Read from the source with `ast`, every import counts — those inside functions too.
"""

from __future__ import annotations

import ast
import itertools
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The rooms of the house; the daemon is a room of its own inside salon/.
PACKAGES = ("bus", "patches", "salon.daemon", "mcpgate", "relay", "salon")
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
    arrows.pop("patches", None)  # below it, not above
    assert arrows == {}, f"bus/ reaches up: {arrows}"


def test_the_library_patches_import_nothing_of_the_house():
    arrows = package_graph()["patches"]
    assert arrows == {}, f"patches/ reaches into the house: {arrows}"


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


# ---------------------------------------------------------------- between files

# A file of this many lines is two answers in one: split it by what each part answers.
MAX_LINES = 700
NOT_MODULES = ("migrations", "tests", "bench")


def module_files() -> dict[str, Path]:
    """dotted name → file, for every module of the packages (a package by its __init__)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def module_imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of this repository a file imports: `from a import b` names the module
    a.b when there is one, else a itself; those inside functions count too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*here[: len(here) - node.level + 1], *filter(None, [base])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else base)
    return (found & modules.keys()) - {name}


def module_circles(package: str) -> list[list[str]]:
    """Each set of modules of `package` that import each other, directly or round a circle
    (the strongly connected components of the import graph with more than one module)."""
    modules = module_files()
    graph = {
        name: module_imports(name, path, modules)
        for name, path in modules.items()
        if name.split(".")[0] == package
    }
    reaches = {name: set(targets) & graph.keys() for name, targets in graph.items()}
    changed = True
    while changed:  # the transitive closure: a few hundred modules, a few passes
        changed = False
        for targets in reaches.values():
            more = set().union(*(reaches[t] for t in targets)) - targets
            if more:
                targets |= more
                changed = True
    circles = {
        tuple(sorted(n for n in graph if n == name or (n in reaches[name] and name in reaches[n])))
        for name in graph
        if name in reaches[name]
    }
    return sorted(list(circle) for circle in circles)


@pytest.mark.parametrize("package", ["bus", "mcpgate", "patches", "relay", "salon"])
def test_no_two_modules_import_each_other(package):
    assert module_circles(package) == []


def test_the_circle_checker_sees_a_circle_through_a_third_module(tmp_path, monkeypatch):
    for name, body in {
        "a": "from pkgx import b\n",
        "b": "def later():\n    from pkgx.c import thing\n",
        "c": "from pkgx.a import x\n",
        "d": "from pkgx import a\n",
    }.items():
        (tmp_path / "pkgx").mkdir(exist_ok=True)
        (tmp_path / "pkgx" / f"{name}.py").write_text(body)
    (tmp_path / "pkgx" / "__init__.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("pkgx",))

    assert module_circles("pkgx") == [["pkgx.a", "pkgx.b", "pkgx.c"]]


@pytest.mark.parametrize("package", ["bus", "mcpgate", "patches", "relay", "salon"])
def test_no_module_is_over_700_lines(package):
    long = {
        str(path.relative_to(REPO)): lines
        for path in sorted((REPO / package).rglob("*.py"))
        if not set(NOT_MODULES) & set(path.relative_to(REPO).parts)
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by what each part answers: {long}"


def test_the_checker_tells_the_daemon_from_the_rest_of_salon(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from salon import daemon\nfrom salon.daemon.line import Line\n")
    assert imports_of(sample) == {DAEMON}

    sample.write_text("from salon import config, daemon\n")
    assert imports_of(sample) == {"salon", DAEMON}


def test_every_package_folder_is_in_pyprojects_package_list():
    import tomllib

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    folders = {
        ".".join(init.parent.relative_to(REPO).parts)
        for top in ("bus", "mcpgate", "patches", "relay", "salon")
        for init in (REPO / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert folders - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
