"""A new seat's sibling entries below its cursor that stay unread (Membership.held_from).
A nullable column, added in place (no table rebuild, so the roster triggers stay)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("bus", "0013_agent_root")]

    operations = [
        migrations.AddField(
            model_name="membership",
            name="held_from",
            field=models.BigIntegerField(blank=True, null=True),
        ),
    ]
