"""An agent's project directory (bus.models.Agent.root): where its policy for requests is.
A nullable column, added in place (no table rebuild, so the roster triggers stay)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("bus", "0012_wake_decision_gone")]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="root",
            field=models.TextField(blank=True, null=True),
        ),
    ]
