"""Admin: the filtered history page with a million entries, server time (bench/admin_bench.py).

Runs bench/admin_bench.py in a process of its own (it sets Django up against its own
SQLite file, bench/admin-bench.db, generated once: a minute or two) and reports its
headline scenario — the entry list filtered by source and a 30-day range — with the
slowest of the other scenarios beside it. --quick uses a 20,000-entry file in /tmp.

    python -m bench.admin_page [--quick]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import REPO, Figure, scenario_main

TARGET_MS = 300


def run(quick: bool) -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "admin.json"
        command = [sys.executable, str(REPO / "bench" / "admin_bench.py"), "--json", str(out)]
        if quick:
            command += ["--db", str(Path(tmp) / "admin.db"), "--entries", "20000", "--runs", "3"]
            entries = 20_000
        else:
            command += ["--runs", "9"]
            entries = 1_000_000
        subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        rows = json.loads(out.read_text())
    load = os.getloadavg()[0]
    label, query, median, low, high, _ = rows[0]
    others = sorted(rows[1:], key=lambda r: -r[2])
    slow = ", ".join(f"{r[0]} {r[2]:.0f} ms" for r in others[:3])
    return [
        Figure(
            f"Admin: filtered history page, {entries:,} entries ({label})",
            round(median),
            "ms",
            TARGET_MS if not quick else None,
            detail=f"`{query}`; median of runs, min {low:.0f} max {high:.0f}; slowest other "
            f"pages: {slow}",
            load=load,
        )
    ]


if __name__ == "__main__":
    scenario_main(run, __doc__)
