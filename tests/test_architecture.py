"""The house's arrows point one way: the domain (bus/) stands alone, the daemon
(salond/) sits on it, the adapters (mcpgate/, relay/) on both, the project (salon/) on
top, and no package imports back: salon → {mcpgate, relay} → salond → bus → patches.
Under them all, the library patches (patches/) import nothing of the house.

Read from the source with `ast`, every import counts — those inside functions too.
"""

from __future__ import annotations

import ast
import itertools
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The rooms of the house, each a top-level package.
PACKAGES = ("bus", "patches", "salond", "mcpgate", "relay", "salon")
DAEMON = "salond"
# Which rooms each room may import: the whole house, drawn once.
MAY_IMPORT = {
    "patches": set(),
    "bus": {"patches"},
    DAEMON: {"bus", "patches"},
    "mcpgate": {DAEMON, "bus", "patches"},
    "relay": {DAEMON, "bus", "patches"},
    "salon": {"mcpgate", "relay", DAEMON, "bus", "patches"},
}


def room_of(module: str, names: list[str] = ()) -> list[str]:
    """The rooms a module name belongs to."""
    top = module.split(".")[0]
    return [top] if top in PACKAGES else []


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
    return sorted((REPO / room).rglob("*.py"))


def package_graph() -> dict[str, dict[str, list[str]]]:
    """room → {imported room: [the files that import it]}."""
    graph: dict[str, dict[str, list[str]]] = {package: {} for package in PACKAGES}
    for package in PACKAGES:
        for path in files_of(package):
            for target in imports_of(path) - {package}:
                graph[package].setdefault(target, []).append(str(path.relative_to(REPO)))
    return graph


@pytest.mark.parametrize("package", PACKAGES)
def test_each_room_imports_only_the_rooms_below_it(package):
    arrows = package_graph()[package]
    upward = {room: files for room, files in arrows.items() if room not in MAY_IMPORT[package]}
    assert upward == {}, f"{package}/ reaches up or across: {upward}"


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


@pytest.mark.parametrize("package", PACKAGES)
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


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_over_700_lines(package):
    long = {
        str(path.relative_to(REPO)): lines
        for path in sorted((REPO / package).rglob("*.py"))
        if not set(NOT_MODULES) & set(path.relative_to(REPO).parts)
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by what each part answers: {long}"


def test_the_checker_tells_the_daemon_from_the_project(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from salond.line import Line\nimport salond\n")
    assert imports_of(sample) == {DAEMON}

    sample.write_text("from salon import config\nfrom salond import host\n")
    assert imports_of(sample) == {"salon", DAEMON}


def test_every_package_folder_is_in_pyprojects_package_list():
    import tomllib

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    folders = {
        ".".join(init.parent.relative_to(REPO).parts)
        for top in PACKAGES
        for init in (REPO / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert folders - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


# ---------------------------------------------------------------- inside functions

# A function with more paths than this is several steps in one: name each step.
MAX_COMPLEXITY = 20


def complexities(path: Path) -> dict[str, int]:
    """Each function's cyclomatic complexity (radon's count), by its name; a method as
    Class.method, a function inside another by its own name."""
    from radon.complexity import cc_visit

    found = {}
    for block in cc_visit(path.read_text(encoding="utf-8")):
        found[block.fullname] = block.complexity
        for inner in getattr(block, "closures", []):
            found[inner.name] = inner.complexity
    return found


@pytest.mark.parametrize("top", (*PACKAGES, "bench", "tests"))
def test_no_function_is_over_complexity_20(top):
    over = {
        f"{path.relative_to(REPO)}:{name}": value
        for path in sorted((REPO / top).rglob("*.py"))
        if "migrations" not in path.parts
        for name, value in complexities(path).items()
        if value > MAX_COMPLEXITY
    }
    assert over == {}, f"name the steps of these: {over}"


def test_the_complexity_checker_counts_branches_methods_and_inner_functions(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(a, b):\n"
        "    if a:\n        return 1\n"
        "    for x in b:\n        if x:\n            return x\n"
        "    return 0\n\n"
        "class C:\n    def m(self):\n        return 1\n\n"
        "def outer():\n    def inner(z):\n        return 1 if z else 2\n    return inner\n"
    )
    found = complexities(sample)
    assert {k: found[k] for k in ("f", "C.m", "inner")} == {"f": 4, "C.m": 1, "inner": 2}
