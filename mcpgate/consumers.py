"""The /mcp endpoint (placeholder until the Streamable HTTP consumer lands)."""

import json

from channels.generic.http import AsyncHttpConsumer


class McpConsumer(AsyncHttpConsumer):
    async def handle(self, body: bytes) -> None:
        payload = {"error": "the MCP endpoint is not implemented in this build yet"}
        await self.send_response(
            501, json.dumps(payload).encode(), headers=[(b"Content-Type", b"application/json")]
        )
