"""Codex CLI as a member of the bus: `salon install --client codex` (install), its hooks'
input and output (hookinput, hooks). The hooks' work is mcpgate.claude's: one set of
rules, each client's own way in and out."""
