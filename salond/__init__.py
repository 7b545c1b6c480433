"""The process-level daemon, neither MCP nor the domain: the doorbell's listener, the
operator's live board, the local line (client: line.py, server: host.LineServer) and the
companions other apps register (companions.py). The adapters register with it: mcpgate/
adds its streams' push path (mcpgate.streamhost), relay/ its bridge (a companion).

Imports only bus/ (the architecture test holds it), and this file imports nothing: the
line's client runs in hooks on every turn.
"""
