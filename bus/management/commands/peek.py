"""`salon peek ROOM`: what `inbox` would show, leaving the cursor where it is."""

from __future__ import annotations

from bus.management.commands.inbox import Command as InboxCommand


class Command(InboxCommand):
    help = "Look at ROOM's unread entries like `inbox`, without moving this seat's cursor."
    advance = False
