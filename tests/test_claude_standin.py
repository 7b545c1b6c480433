"""The scripted Messages API stand-in that the Claude Code tests talk to (no CLI needed)."""

from __future__ import annotations

import json

import httpx

from tests.claude_cli.standin import Request, StandIn, Text, ToolUse, mcp_call

TOOLS = [{"name": "ToolSearch", "input_schema": {"type": "object"}}]


def events(response: httpx.Response) -> list[tuple[str, dict]]:
    parsed = []
    for chunk in response.text.strip().split("\n\n"):
        name, data = chunk.split("\n")
        parsed.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return parsed


def test_a_scripted_tool_call_streams_as_the_messages_api_events():
    with StandIn(mcp_call("agent-salon", "send", {"text": "hi"})) as api:
        response = httpx.post(
            api.url + "/v1/messages", json={"stream": True, "tools": TOOLS, "messages": []}
        )

    assert response.headers["content-type"] == "text/event-stream"
    stream = events(response)
    assert [name for name, _ in stream] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    block = stream[1][1]["content_block"]
    assert (block["type"], block["name"], block["input"]) == ("tool_use", "ToolSearch", {})
    delta = stream[2][1]["delta"]
    assert delta["type"] == "input_json_delta"
    assert json.loads(delta["partial_json"]) == {"query": "select:mcp__agent-salon__send"}
    assert stream[4][1]["delta"]["stop_reason"] == "tool_use"


def test_a_final_text_is_a_plain_json_message_when_not_streamed():
    with StandIn([Text("All done.")]) as api:
        body = httpx.post(api.url + "/v1/messages", json={"tools": TOOLS, "messages": []}).json()

    assert body["content"] == [{"type": "text", "text": "All done."}]
    assert body["stop_reason"] == "end_turn"


def test_side_requests_are_recorded_but_do_not_use_up_the_script():
    with StandIn([ToolUse("Bash", {"command": "true"})]) as api:
        side = httpx.post(api.url + "/v1/messages", json={"messages": [], "max_tokens": 1})
        main = httpx.post(api.url + "/v1/messages", json={"tools": TOOLS, "messages": []})
        counted = httpx.post(api.url + "/v1/messages/count_tokens", json={"messages": []})
        missing = httpx.get(api.url + "/v1/models")

    assert side.json()["content"] == [{"type": "text", "text": "ok"}]
    assert main.json()["content"][0]["name"] == "Bash"
    assert counted.json() == {"input_tokens": 100}
    assert missing.status_code == 404
    assert [r.path for r in api.requests] == [
        "/v1/messages",
        "/v1/messages",
        "/v1/messages/count_tokens",
    ]
    assert len(api.main_requests) == 1


def test_a_function_script_decides_from_what_the_model_was_shown():
    def decide(request: Request) -> Text:
        return Text("saw it" if "QUESTION" in request.last_tool_result() else "nothing")

    conversation = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a QUESTION"}],
        },
    ]
    with StandIn(decide) as api:
        body = httpx.post(
            api.url + "/v1/messages", json={"tools": TOOLS, "messages": conversation}
        ).json()

    assert body["content"][0]["text"] == "saw it"
    assert api.seen("a QUESTION")
