"""The letterbox and the safety net (bus.services.triage): one judgement per entry per seat, kept on
its ledger row."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("bus", "0008_one_telling")]

    operations = [
        migrations.AddField(
            model_name="wakedecision",
            name="judge",
            field=models.CharField(blank=True, default="", max_length=9),
        ),
        migrations.AddField(
            model_name="wakedecision",
            name="judgement",
            field=models.CharField(blank=True, default="", max_length=8),
        ),
        migrations.AddField(
            model_name="wakedecision",
            name="judged_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
