"""Gemini CLI as a member: what `salon install --client gemini` writes, its hooks'
input and output, and how its MCP server learns the session it serves."""
