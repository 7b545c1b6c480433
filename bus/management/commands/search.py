"""`salon search`: bus.management.verbs has the command; this is its manage.py form."""

from bus.management.base import verb_command

Command = verb_command("search")
