from django.apps import AppConfig

from salond import companions


class McpGateConfig(AppConfig):
    name = "mcpgate"
    verbose_name = "MCP endpoint"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The Claude Code hooks are an operation of the local line, like the bus commands.
        from bus.management import ops
        from mcpgate.claude import hooks
        from mcpgate.codex import hooks as codex_hooks
        from mcpgate.gemini import hooks as gemini_hooks
        from mcpgate.opencode import hooks as opencode_hooks

        hooks.CLIENT_HOOKS.update(codex=codex_hooks, gemini=gemini_hooks, opencode=opencode_hooks)
        ops.register("hook", hooks.operation)
        # The Stop hook's judge (bus.services.triage): claimed and recorded here, asked by the hook.
        ops.register("triage-claim", hooks.triage_claim)
        ops.register("triage-record", hooks.triage_record)
        # A server starting holds no stream yet (mcpgate.sessions.forget_streams).
        companions.add_starting(_forget_streams)


def _forget_streams() -> None:
    # Imported when called: sessions loads the tool table, which a command never needs.
    from mcpgate import sessions

    sessions.forget_streams()
