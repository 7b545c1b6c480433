"""Cross-project requests: a REQUEST's ask key and what the receiving project's policy
made of it (bus.models.Request): the verdict and reason, the one claim of a serve or a
gate, and its outcome."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("bus", "0015_token_folded_label")]

    operations = [
        # Choices only: no change to the column (nor a table rebuild on SQLite).
        migrations.AlterField(
            model_name="entry",
            name="via",
            field=models.CharField(
                choices=[
                    ("tool", "tool"),
                    ("cli", "cli"),
                    ("notify", "notify"),
                    ("relay", "relay"),
                    ("policy", "policy"),
                ],
                max_length=8,
            ),
        ),
        migrations.CreateModel(
            name="Request",
            fields=[
                (
                    "entry",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="request",
                        serialize=False,
                        to="bus.entry",
                    ),
                ),
                ("ask", models.CharField(max_length=300)),
                ("agent", models.CharField(max_length=64)),
                ("writer", models.CharField(max_length=200)),
                ("verdict", models.CharField(max_length=8)),
                ("reason", models.TextField()),
                ("argv", models.JSONField(blank=True, null=True)),
                ("root", models.TextField(blank=True, default="")),
                ("decided_at", models.DateTimeField()),
                ("outcome", models.CharField(blank=True, default="", max_length=8)),
                ("claimed_at", models.DateTimeField(blank=True, null=True)),
                ("claimed_by", models.CharField(blank=True, default="", max_length=120)),
                ("done_at", models.DateTimeField(blank=True, null=True)),
                ("answer", models.UUIDField(blank=True, null=True)),
                ("seconds", models.FloatField(blank=True, null=True)),
                (
                    "room",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="bus.room",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("outcome", "")),
                        fields=["decided_at"],
                        name="request_open",
                    ),
                    models.Index(fields=["decided_at"], name="request_by_decided_at"),
                ],
            },
        ),
    ]
