"""`salon token issue|revoke|list [LABEL]`: bearer tokens for /mcp and /notify (SPEC §9)."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = (
        "issue LABEL prints a new token (only its hash is stored); revoke LABEL revokes "
        "every token of LABEL; list [LABEL] shows labels with tokens."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["issue", "revoke", "list"])
        parser.add_argument("label", type=cli.name_arg, nargs="?", help="the agent label")
        cli.add_json_flag(parser)

    def handle(self, *, action, label, json, **options):
        from bus import services

        if action != "list" and not label:
            raise self.usage(f"name the label: salon token {action} LABEL")
        if action == "issue":
            result = {"label": label, "token": services.issue_token(label=label)}
            text = result["token"]
            self.note(
                f"salon token: store this token now; only its hash is kept. "
                f"Callers send it as 'Authorization: Bearer <token>' for {label}."
            )
        elif action == "revoke":
            result = {"label": label, "revoked": services.revoke_tokens(label=label)}
            text = f"revoked {cli.plural(result['revoked'], 'token')} of {label}"
        else:
            result = [t for t in services.list_tokens() if label in (None, t["label"])]
            text = (
                "\n".join(
                    f"{t['label']}  {cli.plural(t['tokens'], 'token')} · "
                    f"newest {cli.local_time(t['newest'])}"
                    for t in result
                )
                or "no tokens issued"
            )
        if json:
            self.emit_json(result)
        else:
            self.say(text)
