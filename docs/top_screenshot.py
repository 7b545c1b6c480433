"""Draws docs/top.svg, `salon top` at 100x30 as Textual's screenshot, and docs/top.png
from it (with chromium, where there is one), on a store of its own seeded with a small
team (the seats of tests/live_kit.py) and a few entries.

    python docs/top_screenshot.py

It writes the SVG and the PNG; its store lives in a temporary directory, removed after.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    data = tempfile.mkdtemp(prefix="top-shot-")
    os.environ["AGENT_SALON_DB"] = os.path.join(data, "salon.db")
    os.environ["DJANGO_SETTINGS_MODULE"] = "salon.settings"
    from salon import config, store

    where = store.prepare(config.merged_environment())
    store.ensure_tables(where)
    import django

    django.setup()
    from bus import services
    from bus.models import Seat
    from tests.live_kit import seed_rows

    seed_rows()
    web = Seat.objects.get(name__startswith="web-app#")
    api = Seat.objects.get(name__startswith="api-service#")
    services.rooms.join_room(seat=api, room="ops")
    services.entries.send_entry(
        seat=web, room="ops", type="REQUEST", to=["api-service"], text="Rotate the keys at 17:00."
    )
    services.entries.send_entry(
        seat=api, room="team", type="ANSWER", to=["web-app"], text="I own it; fix is in review."
    )
    services.entries.send_entry(seat=web, room="team", type="FACT", text="Login form ships today.")
    try:
        asyncio.run(shoot())
    finally:
        shutil.rmtree(data, ignore_errors=True)


async def shoot() -> None:
    from salon.top.app import Flow, Top

    app = Top()
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(200):
            if app.query_one("#flow", Flow).row_count == 5 and app.room:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        app.save_screenshot(filename="top.svg", path=str(HERE))
    print(HERE / "top.svg")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium:
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--screenshot={HERE / 'top.png'}", "--window-size=1300,800",
             (HERE / "top.svg").as_uri()],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        print(HERE / "top.png")


if __name__ == "__main__":
    main()
