"""Whether a seat was gone when a wake decision was made for it (WakeDecision.gone): the
live flow leaves such a seat out of an entry's "wakes", as `send` does. Nullable, so the
column is added in place (no copy of a big ledger); older rows read as not recorded."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("bus", "0011_no_index_a_unique_covers")]

    operations = [
        migrations.AddField(
            model_name="wakedecision",
            name="gone",
            field=models.BooleanField(blank=True, null=True),
        ),
    ]
