"""The admin's session engine: Django's signed cookie, bound to the staff user's login
key (salon.models.StaffKey), which logging out replaces.

A signed cookie alone stays valid until it expires, whatever the browser did: one copied
before `/admin/logout/` would still open the admin. Checking the key where the session is
loaded covers every door that reads a session, the admin's pages and the live view's
stream (Channels loads sessions with this same engine).
"""

from __future__ import annotations

import secrets

from django.contrib import auth
from django.contrib.sessions.backends import signed_cookies

STAFF_KEY = "_salon_staff_key"


class SessionStore(signed_cookies.SessionStore):
    def load(self) -> dict:
        data = super().load()
        user_id = data.get(auth.SESSION_KEY)
        if user_id is not None and not _key_is_current(user_id, data.get(STAFF_KEY)):
            # As for a cookie whose signature fails: an empty, anonymous session.
            self.create()
            return {}
        return data


def _key_is_current(user_id: object, key: object) -> bool:
    from salon.models import StaffKey

    if not isinstance(key, str) or not key:
        return False
    return StaffKey.objects.filter(user_id=user_id, key=key).exists()


def on_login(sender, request, user, **kwargs) -> None:
    """Stamp the new session with the user's current key (made at the first login)."""
    from salon.models import StaffKey

    if request is None or not hasattr(request, "session"):
        return
    row, _ = StaffKey.objects.get_or_create(
        user_id=user.pk, defaults={"key": secrets.token_urlsafe(32)}
    )
    request.session[STAFF_KEY] = row.key


def on_logout(sender, request, user, **kwargs) -> None:
    """A new key: every session of this user made before now reads as logged out."""
    from salon.models import StaffKey

    if user is None or user.pk is None:
        return
    StaffKey.objects.update_or_create(user_id=user.pk, defaults={"key": secrets.token_urlsafe(32)})
