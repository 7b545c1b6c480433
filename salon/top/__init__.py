"""`salon top`: the operator's full-screen terminal view (rooms · seats · the live flow).

`run` is the only way in: it imports Textual (salon.top.app), so no other command, and
no hook, pays for loading it. salon.top.view holds what the screen shows, as text.
"""

from __future__ import annotations

import contextlib
import os
import sys

# What puts a terminal back as a shell expects it, whatever state a screen left it in:
# the normal screen, the cursor shown, mouse reporting and bracketed paste off.
RESTORE = "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l"


def run(room: str | None = None) -> int:
    """The view until `q` (0) or Ctrl-C (130); after a crash, Textual's report and 1.
    The terminal's modes are saved first and put back on every way out."""
    saved = _terminal_modes()
    try:
        from salon.top.app import Top

        app = Top(room)
        app.run()
        return app.return_code or 0
    finally:
        _restore(saved)


def _terminal_modes():
    try:
        import termios

        return termios.tcgetattr(sys.stdin.fileno())
    except (ImportError, OSError, ValueError):
        return None


def _restore(saved) -> None:
    with contextlib.suppress(OSError, ValueError):
        if os.isatty(sys.stdout.fileno()):
            os.write(sys.stdout.fileno(), RESTORE.encode())
    if saved is not None:
        with contextlib.suppress(ImportError, OSError, ValueError):
            import termios

            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
