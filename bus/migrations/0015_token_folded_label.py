"""Tokens are looked up by the label in any case: a variant of a tokened label is refused."""

import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("bus", "0014_membership_held_from"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="token",
            index=models.Index(
                django.db.models.functions.text.Lower("label"),
                condition=models.Q(("revoked_at__isnull", True)),
                name="token_active_by_folded_label",
            ),
        ),
    ]
