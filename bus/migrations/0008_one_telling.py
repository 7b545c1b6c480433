"""One telling per entry per seat: `told_at` / `told_by` replace the separate marks of
`salon wait` (announced_at) and the Stop hook (nudged_at). A push stays a mark of its own
and no longer counts as a telling."""

from django.db import migrations, models
from django.db.models import F, Q


def carry_over(apps, schema_editor):
    WakeDecision = apps.get_model("bus", "WakeDecision")
    rows = WakeDecision.objects
    rows.filter(announced_at__isnull=False).update(told_at=F("announced_at"), told_by="monitor")
    rows.filter(told_at__isnull=True, nudged_at__isnull=False).update(
        told_at=F("nudged_at"), told_by="stop"
    )
    # A stop that came before an announcement told first.
    rows.filter(Q(nudged_at__lt=F("announced_at"))).update(told_at=F("nudged_at"), told_by="stop")


class Migration(migrations.Migration):
    dependencies = [("bus", "0007_entry_signature_v2")]

    operations = [
        migrations.AddField(
            model_name="wakedecision",
            name="told_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="wakedecision",
            name="told_by",
            field=models.CharField(blank=True, default="", max_length=8),
        ),
        migrations.RunPython(carry_over, migrations.RunPython.noop),
        migrations.RemoveField(model_name="wakedecision", name="announced_at"),
        migrations.RemoveField(model_name="wakedecision", name="nudged_at"),
    ]
