from django.conf import settings
from django.db import models


class StaffKey(models.Model):
    """A staff user's current login key: every admin session carries it, and logging out
    replaces it, so a session cookie copied before the logout opens nothing afterwards
    (salon.sessions). It opens nothing by itself: a session is a cookie signed with the
    secret."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True
    )
    key = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"login key of user {self.user_id}"
