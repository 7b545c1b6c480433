from django.apps import AppConfig


class McpGateConfig(AppConfig):
    name = "mcpgate"
    verbose_name = "MCP endpoint"
    default_auto_field = "django.db.models.BigAutoField"
