"""Django for a command or hook that works on the store itself: the lean app set.

A bus command spends most of its start-up importing Django; settings.CLI_APPS (the
project's own apps: no daphne/twisted, admin, auth or channels) keeps that to the ORM,
and nothing else of django.setup() runs:

* `django.urls.set_script_prefix` pulls in django.http and the serializers for a prefix
  that only matters when serving;
* Django's DEFAULT_LOGGING has a `mail_admins` handler whose set-up imports
  django.views.debug (http, urls, templates: ~95 ms measured) to e-mail errors no command
  sends. Python's last-resort handler still writes warnings and errors to stderr.

bench/RESULTS.md has the numbers. Migrations never run with the lean set.
"""

from __future__ import annotations

import os


def setup() -> None:
    """Populate the lean app set, once per process (a no-op once Django is set up)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")
    from django.apps import apps

    if apps.ready:
        return
    from django.conf import settings

    settings.INSTALLED_APPS = list(settings.CLI_APPS)
    apps.populate(settings.INSTALLED_APPS)
