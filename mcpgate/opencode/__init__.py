"""OpenCode as a member: what `salon install --client opencode` writes (the project's
opencode.json and a plugin file in the data directory), the plugin's hooks' input and
output, and how its MCP server learns the session of each call."""
