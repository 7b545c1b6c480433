"""`salon runserver` (daphne's, which serves the ASGI application): with the open-bind
warning of `salon serve` and the project's access log (salon.serving).

Found before daphne's own command because the `salon` app comes first in INSTALLED_APPS.
"""

from __future__ import annotations

from daphne.management.commands.runserver import Command as DaphneRunserver

from salon import serving


class Command(DaphneRunserver):
    def inner_run(self, *args, **options):
        # The address is known only once the arguments are parsed; every start says it.
        warning = serving.open_bind_warning(self.addr)
        if warning:
            self.stderr.write(warning)
        return super().inner_run(*args, **options)

    def log_action(self, protocol, action, details):
        serving.log_access(protocol, action, details)
