"""The official Node MCP SDK client (what Claude Code is built on) against a real daemon.

tests/clients/channel_roundtrip.mjs does the talking; see its header for the claims.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.clients.runtime import CLIENTS, NO_NODE, ensure_installed, find_node

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node():
    found = find_node(minimum=18)
    if found is None:
        pytest.skip(NO_NODE)
    ensure_installed(found)
    return found


def test_the_node_sdk_hears_a_question_and_not_a_fact_nor_while_quiet(node, daemon):
    done = subprocess.run(
        [node.node, str(CLIENTS / "channel_roundtrip.mjs"), daemon.url],
        cwd=CLIENTS,
        env=node.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stdout.strip().splitlines()
    report = (
        f"node {node.version} ({node.source}) exit {done.returncode}\n"
        f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}\ndaemon log:\n{daemon.log()[-4000:]}"
    )
    assert done.returncode == 0, report
    summary = json.loads(lines[-1])
    alpha, beta = summary["seats"]["alpha"], summary["seats"]["beta"]
    assert summary["ok"] is True, report
    assert alpha.startswith("alpha#") and beta.startswith("beta#"), report
    assert summary["meta"]["source"] == alpha, report
    assert summary["meta"]["type"] == "QUESTION", report
    assert summary["meta"]["to"] == beta, report
    assert all(isinstance(v, str) for v in summary["meta"].values()), report
    assert summary["pushed"] == 2, report  # the two QUESTIONs, not the FACT nor the quiet one
    assert summary["factPushed"] is False and summary["quietPushed"] is False, report
    assert summary["unlabeledSendError"] == -32602, report
