"""mcpgate.protocol: the pure JSON-RPC 2.0 / MCP message layer (no Django, no database)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime

import pytest

from mcpgate import greeting
from mcpgate import protocol as p
from mcpgate.arguments import validate_arguments
from mcpgate.protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_VERSION,
    MAX_BODY_BYTES,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    STATELESS_PROBE_VERSION,
    SUPPORTED_VERSIONS,
    Notification,
    ProtocolError,
    Request,
    Response,
)

GOOD_POST = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def refusal(body: bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        p.parse_body(body)
    return info.value


def refusal_of(message: object) -> ProtocolError:
    return refusal(json.dumps(message).encode())


def header_refusal(**headers: str) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        p.check_post_headers({k.replace("_", "-"): v for k, v in headers.items()})
    return info.value


# ---------------------------------------------------------------- constants


def test_the_supported_versions_are_the_four_handshake_versions_newest_first():
    assert SUPPORTED_VERSIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert SUPPORTED_VERSIONS[0] == LATEST_VERSION


def test_the_stateless_probe_version_is_not_a_supported_version():
    assert STATELESS_PROBE_VERSION == "2026-07-28"
    assert STATELESS_PROBE_VERSION not in SUPPORTED_VERSIONS


def test_the_body_limit_is_4_mib():
    assert MAX_BODY_BYTES == 4_194_304


def test_the_error_codes_are_the_jsonrpc_ones():
    assert (PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR) == (
        -32700,
        -32600,
        -32601,
        -32602,
        -32603,
    )


# ---------------------------------------------------------------- ProtocolError


def test_a_protocol_error_body_is_a_jsonrpc_error_object():
    error = ProtocolError(400, INVALID_REQUEST, "no session: send initialize first", 7)
    assert error.body() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32600, "message": "no session: send initialize first"},
    }


def test_a_protocol_error_keeps_status_code_message_and_id():
    error = ProtocolError(404, INVALID_REQUEST, "unknown session", "abc")
    assert (error.status, error.code, error.message, error.id, str(error)) == (
        404,
        -32600,
        "unknown session",
        "abc",
        "unknown session",
    )


def test_a_protocol_error_body_carries_data_when_given():
    error = ProtocolError(400, INVALID_PARAMS, "no such room", 1, data={"rooms": ["salon"]})
    assert error.body()["error"] == {
        "code": -32602,
        "message": "no such room",
        "data": {"rooms": ["salon"]},
    }


def test_http_error_defaults_to_invalid_request_with_no_id():
    error = p.http_error(403, "host not allowed")
    assert (error.status, error.code, error.id, error.message) == (
        403,
        -32600,
        None,
        "host not allowed",
    )


def test_http_error_keeps_the_given_code_and_id():
    error = p.http_error(400, "room 'tem' does not exist", INVALID_PARAMS, 3)
    assert error.body() == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32602, "message": "room 'tem' does not exist"},
    }


# ---------------------------------------------------------------- parse_body: good messages


def test_a_request_parses_with_its_id_method_and_params():
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "send"}}'
    assert p.parse_body(body) == Request(id=1, method="tools/call", params={"name": "send"})


def test_a_request_without_params_gets_empty_params():
    assert p.parse_body(b'{"jsonrpc":"2.0","id":2,"method":"ping"}') == Request(2, "ping", {})


def test_a_string_request_id_is_kept_as_a_string():
    assert p.parse_body(b'{"jsonrpc":"2.0","id":"a-1","method":"ping"}').id == "a-1"


def test_a_message_without_id_is_a_notification():
    body = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    assert p.parse_body(body) == Notification(method="notifications/initialized", params={})


def test_a_result_reply_parses_as_a_response():
    body = b'{"jsonrpc":"2.0","id":5,"result":{"roots":[]}}'
    assert p.parse_body(body) == Response(id=5, result={"roots": []}, error=None)


def test_an_error_reply_with_null_id_parses_as_a_response():
    body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}'
    assert p.parse_body(body) == Response(
        id=None, result=None, error={"code": -32700, "message": "bad"}
    )


def test_a_utf8_byte_order_mark_is_tolerated():
    body = b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}'
    assert p.parse_body(body) == Request(1, "ping", {})


def test_a_surrogate_pair_escape_is_accepted():
    body = b'{"jsonrpc":"2.0","method":"m","params":{"t":"\\ud83d\\ude00"}}'
    assert p.parse_body(body) == Notification("m", {"t": "\U0001f600"})


def test_a_body_of_exactly_4_mib_is_not_refused_for_size():
    message = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    body = message + b" " * (MAX_BODY_BYTES - len(message))
    assert p.parse_body(body) == Request(1, "ping", {})


def test_parse_message_classifies_already_decoded_json():
    assert p.parse_message({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}) == Request(
        9, "tools/list", {}
    )


# ---------------------------------------------------------------- parse_body: refusals


def test_a_body_over_4_mib_is_413():
    error = refusal(b" " * (MAX_BODY_BYTES + 1))
    assert (error.status, error.code, error.message) == (
        413,
        INVALID_REQUEST,
        "request body is 4194305 bytes; the limit is 4194304 bytes (4 MiB): send a smaller message",
    )


def test_invalid_utf8_is_a_parse_error():
    error = refusal(b'{"jsonrpc":"2.0","id":1,"method":"\xff"}')
    assert (error.status, error.code, error.message) == (
        400,
        PARSE_ERROR,
        "request body is not valid JSON (not UTF-8, a bad byte at offset 34): "
        "send one JSON-RPC 2.0 message as JSON",
    )


def test_invalid_json_is_a_parse_error_naming_the_position():
    error = refusal(b'{"jsonrpc": "2.0",,}')
    assert (error.status, error.code, error.id, error.message) == (
        400,
        PARSE_ERROR,
        None,
        "request body is not valid JSON (Expecting property name enclosed in double quotes "
        "at line 1 column 19): send one JSON-RPC 2.0 message as JSON",
    )


def test_an_empty_body_is_a_parse_error():
    error = refusal(b"  \n")
    assert (error.status, error.code, error.message) == (
        400,
        PARSE_ERROR,
        "request body is not valid JSON (it is empty): send one JSON-RPC 2.0 message as JSON",
    )


def test_nan_is_a_parse_error():
    error = refusal(b'{"jsonrpc":"2.0","method":"m","params":{"x":NaN}}')
    assert (error.status, error.code, error.message) == (
        400,
        PARSE_ERROR,
        "request body is not valid JSON (NaN is not JSON): send one JSON-RPC 2.0 message as JSON",
    )


def test_deep_nesting_is_a_parse_error_not_a_crash():
    error = refusal(b"[" * 200_000 + b"]" * 200_000)
    assert (error.status, error.code, error.message) == (
        400,
        PARSE_ERROR,
        "request body is not valid JSON (nested more than 512 levels deep): "
        "send one JSON-RPC 2.0 message as JSON",
    )


def test_a_huge_integer_literal_is_a_parse_error_not_a_crash():
    error = refusal(b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}')
    assert (error.status, error.code, error.message) == (
        400,
        PARSE_ERROR,
        "request body is not valid JSON (a number is longer than 64 characters): "
        "send one JSON-RPC 2.0 message as JSON",
    )


def test_a_lone_surrogate_escape_is_refused_before_it_reaches_storage():
    error = refusal(b'{"jsonrpc":"2.0","method":"m","params":{"t":"\\ud800"}}')
    assert (error.status, error.code, error.message) == (
        400,
        PARSE_ERROR,
        "request body is not valid JSON (a lone UTF-16 surrogate escape (\\ud800-\\udfff "
        "without its pair)): send one JSON-RPC 2.0 message as JSON",
    )


def test_a_batch_array_is_refused_with_400():
    error = refusal(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
    assert (error.status, error.code, error.id, error.message) == (
        400,
        INVALID_REQUEST,
        None,
        "JSON-RPC batches (arrays) are not accepted: send one JSON-RPC message per request",
    )


def test_an_empty_batch_is_refused_as_a_batch():
    assert refusal(b"[]").message.startswith("JSON-RPC batches (arrays) are not accepted")


def test_a_json_scalar_is_an_invalid_request():
    error = refusal(b'"ping"')
    assert (error.status, error.code, error.message) == (
        400,
        INVALID_REQUEST,
        'a JSON-RPC message must be a JSON object, got a string: send {"jsonrpc": "2.0", '
        '"method": ..., "id": ...}',
    )


def test_a_missing_jsonrpc_member_is_an_invalid_request_that_echoes_the_id():
    error = refusal_of({"id": 4, "method": "ping"})
    assert (error.status, error.code, error.id, error.message) == (
        400,
        INVALID_REQUEST,
        4,
        '"jsonrpc" must be the string "2.0" (got nothing): add "jsonrpc": "2.0"',
    )


def test_a_wrong_jsonrpc_version_is_an_invalid_request():
    error = refusal_of({"jsonrpc": "1.0", "id": 4, "method": "ping"})
    assert error.message == '"jsonrpc" must be the string "2.0" (got \'1.0\'): add "jsonrpc": "2.0"'


def test_a_numeric_jsonrpc_version_is_an_invalid_request():
    error = refusal_of({"jsonrpc": 2.0, "id": 4, "method": "ping"})
    assert (error.code, error.message) == (
        INVALID_REQUEST,
        '"jsonrpc" must be the string "2.0" (got 2.0): add "jsonrpc": "2.0"',
    )


def test_a_null_request_id_is_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": None, "method": "ping"})
    assert (error.status, error.code, error.id, error.message) == (
        400,
        INVALID_REQUEST,
        None,
        'a request "id" must be a string or an integer, got null: '
        'use a notification (no "id") if you expect no answer',
    )


def test_a_boolean_request_id_is_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": True, "method": "ping"})
    assert (error.code, error.id, error.message) == (
        INVALID_REQUEST,
        None,
        'a request "id" must be a string or an integer, got a boolean: '
        'use a notification (no "id") if you expect no answer',
    )


def test_a_float_request_id_is_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": 1.5, "method": "ping"})
    assert error.message.startswith('a request "id" must be a string or an integer, got a number')


def test_an_object_request_id_is_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping"})
    assert error.message.startswith('a request "id" must be a string or an integer, got an object')


def test_a_non_string_method_is_an_invalid_request_that_echoes_the_id():
    error = refusal_of({"jsonrpc": "2.0", "id": "r1", "method": 5})
    assert (error.status, error.code, error.id, error.message) == (
        400,
        INVALID_REQUEST,
        "r1",
        '"method" must be a non-empty string, got an integer',
    )


def test_an_empty_method_is_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": 1, "method": ""})
    assert error.message == '"method" must be a non-empty string, got a string'


def test_array_params_are_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]})
    assert (error.status, error.code, error.id, error.message) == (
        400,
        INVALID_REQUEST,
        1,
        '"params" must be an object, got an array: '
        "send named parameters as an object, or leave params out",
    )


def test_null_params_are_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "method": "m", "params": None})
    assert error.message == (
        '"params" must be an object, got null: '
        "send named parameters as an object, or leave params out"
    )


def test_method_and_result_together_are_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": 1, "method": "ping", "result": {}})
    assert (error.code, error.message) == (
        INVALID_REQUEST,
        'a message carries either "method" (request/notification) or "result"/"error" '
        "(response), never both",
    )


def test_result_and_error_together_are_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1}})
    assert (error.code, error.id, error.message) == (
        INVALID_REQUEST,
        1,
        'a response carries "result" or "error", not both',
    )


def test_a_non_object_error_reply_is_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": 1, "error": "boom"})
    assert error.message == 'a response "error" must be an object, got a string'


def test_a_result_reply_without_id_is_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "result": {}})
    assert (error.status, error.code, error.message) == (
        400,
        INVALID_REQUEST,
        'a response "id" must be a string or an integer, got nothing',
    )


def test_a_result_reply_with_null_id_is_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": None, "result": {}})
    assert error.message == 'a response "id" must be a string or an integer, got null'


def test_a_message_with_neither_method_nor_result_is_an_invalid_request():
    error = refusal_of({"jsonrpc": "2.0", "id": 1})
    assert (error.status, error.code, error.id, error.message) == (
        400,
        INVALID_REQUEST,
        1,
        'a JSON-RPC message needs a "method" (request or notification) '
        'or a "result"/"error" (response)',
    )


# ---------------------------------------------------------------- POST headers


def test_the_standard_accept_and_content_type_pass():
    assert p.check_post_headers(GOOD_POST) is None


def test_accept_without_event_stream_is_406():
    error = header_refusal(accept="application/json", content_type="application/json")
    assert (error.status, error.code, error.message) == (
        406,
        INVALID_REQUEST,
        "Accept must allow both application/json and text/event-stream "
        "(got 'application/json'): send 'Accept: application/json, text/event-stream'",
    )


def test_accept_without_json_is_406():
    error = header_refusal(accept="text/event-stream", content_type="application/json")
    assert error.status == 406


def test_a_missing_accept_is_406():
    error = header_refusal(content_type="application/json")
    assert (error.status, error.message) == (
        406,
        "Accept must allow both application/json and text/event-stream (got None): "
        "send 'Accept: application/json, text/event-stream'",
    )


def test_a_star_star_accept_passes():
    assert p.check_post_headers({"accept": "*/*", "content-type": "application/json"}) is None


def test_type_wildcards_count_for_accept():
    headers = {"accept": "application/*, text/*", "content-type": "application/json"}
    assert p.check_post_headers(headers) is None


def test_q_zero_excludes_a_media_type():
    error = header_refusal(
        accept="application/json, text/event-stream;q=0", content_type="application/json"
    )
    assert error.status == 406


def test_an_exact_q_zero_overrides_a_wildcard():
    error = header_refusal(accept="application/json;q=0, */*", content_type="application/json")
    assert error.status == 406


def test_a_positive_q_still_accepts():
    headers = {
        "accept": "application/json;q=0.5, text/event-stream;q=0.1",
        "content-type": "application/json",
    }
    assert p.check_post_headers(headers) is None


def test_a_garbled_q_does_not_refuse():
    headers = {
        "accept": "application/json;q=high, text/event-stream",
        "content-type": "application/json",
    }
    assert p.check_post_headers(headers) is None


def test_accept_matching_ignores_case_and_spaces():
    headers = {
        "accept": " Application/JSON ;charset=utf-8 ,TEXT/Event-Stream",
        "content-type": "Application/Json",
    }
    assert p.check_post_headers(headers) is None


def test_a_wrong_content_type_is_415():
    error = header_refusal(accept=GOOD_POST["accept"], content_type="text/plain")
    assert (error.status, error.code, error.message) == (
        415,
        INVALID_REQUEST,
        "Content-Type must be application/json (got 'text/plain'): "
        "send the JSON-RPC message with 'Content-Type: application/json'",
    )


def test_a_missing_content_type_is_415():
    error = header_refusal(accept=GOOD_POST["accept"])
    assert (error.status, error.message) == (
        415,
        "Content-Type must be application/json (got None): "
        "send the JSON-RPC message with 'Content-Type: application/json'",
    )


def test_a_utf8_charset_parameter_is_accepted():
    headers = {"accept": GOOD_POST["accept"], "content-type": 'application/json; charset="UTF-8"'}
    assert p.check_post_headers(headers) is None


def test_a_non_utf8_charset_is_415():
    error = header_refusal(
        accept=GOOD_POST["accept"], content_type="application/json; charset=latin-1"
    )
    assert (error.status, error.message) == (
        415,
        "charset 'latin-1' is not supported: MCP messages are UTF-8; "
        "send 'Content-Type: application/json' (or charset=utf-8)",
    )


def test_accept_is_checked_before_content_type():
    assert header_refusal(accept="text/html", content_type="text/plain").status == 406


# ---------------------------------------------------------------- GET Accept


def test_get_accept_with_event_stream_is_accepted():
    assert p.accepts_event_stream("text/event-stream") is True


def test_get_accept_star_star_is_accepted():
    assert p.accepts_event_stream("*/*") is True


def test_get_accept_without_event_stream_is_refused():
    assert p.accepts_event_stream("application/json") is False


def test_get_with_no_accept_is_refused():
    assert p.accepts_event_stream(None) is False


def test_get_accept_with_q_zero_event_stream_is_refused():
    assert p.accepts_event_stream("text/event-stream;q=0, */*;q=0.5") is False


def test_a_media_range_without_slash_is_ignored():
    assert p.accepts_event_stream("event-stream, text/html") is False


# ---------------------------------------------------------------- stateless probe & versions


def test_the_2026_probe_is_recognised_by_header_and_by_method():
    ping = Request(1, "ping", {})
    discover = Request(1, "server/discover", {})
    assert p.is_stateless_probe({"mcp-protocol-version": "2026-07-28"}, ping) is True
    assert p.is_stateless_probe({}, discover) is True


def test_the_probe_header_is_recognised_before_the_body_is_parsed():
    assert p.is_stateless_probe({"mcp-protocol-version": " 2026-07-28 "}, None) is True


def test_server_discover_inside_a_session_is_not_a_probe():
    discover = Request(1, "server/discover", {})
    assert p.is_stateless_probe({"mcp-session-id": "s1"}, discover) is False


def test_a_handshake_request_is_not_a_probe():
    init = Request(1, "initialize", {"protocolVersion": "2025-11-25"})
    assert p.is_stateless_probe({"mcp-protocol-version": "2025-11-25"}, init) is False


def test_a_client_response_is_not_a_probe():
    assert p.is_stateless_probe({}, Response(id=1, result={})) is False


def test_the_stateless_probe_refusal_is_400_invalid_request_pointing_at_initialize():
    error = p.stateless_probe_refusal(12)
    assert (error.status, error.code, error.id, error.message) == (
        400,
        -32600,
        12,
        "protocol 2026-07-28 (stateless) is not supported: this server needs a session; "
        "send initialize with one of 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05",
    )


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_a_supported_version_is_kept(version):
    assert p.negotiate_version(version) == version


def test_an_unsupported_version_negotiates_to_the_latest():
    assert p.negotiate_version("2024-01-01") == "2025-11-25"


def test_the_stateless_version_negotiates_to_the_latest():
    assert p.negotiate_version("2026-07-28") == "2025-11-25"


def test_a_missing_version_negotiates_to_the_latest():
    assert p.negotiate_version(None) == "2025-11-25"


def test_a_non_string_version_negotiates_to_the_latest():
    assert p.negotiate_version(["2025-06-18"]) == "2025-11-25"


def test_an_absent_version_header_is_allowed():
    assert p.check_protocol_version_header(None) is None


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_a_supported_version_header_is_allowed(version):
    assert p.check_protocol_version_header(version) is None


def test_an_unsupported_version_header_is_400_naming_the_supported_ones():
    with pytest.raises(ProtocolError) as info:
        p.check_protocol_version_header("2099-01-01")
    error = info.value
    assert (error.status, error.code, error.message) == (
        400,
        INVALID_REQUEST,
        "unsupported MCP-Protocol-Version '2099-01-01': supported are 2025-11-25, 2025-06-18, "
        "2025-03-26, 2024-11-05; send the version negotiated at initialize",
    )


def test_an_empty_version_header_is_400():
    with pytest.raises(ProtocolError) as info:
        p.check_protocol_version_header("")
    assert info.value.status == 400


def test_the_header_names_are_lower_case_for_asgi():
    assert (p.SESSION_HEADER, p.VERSION_HEADER, p.LAST_EVENT_ID_HEADER) == (
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    )


# ---------------------------------------------------------------- building messages


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_the_initialize_answer_is_an_initialize_result_of_the_sdks_own_types(version):
    import mcp_types

    _, answer = greeting.initialize_answer(7, {"protocolVersion": version})

    result = answer["result"]
    typed = mcp_types.InitializeResult.model_validate(result)
    dumped = typed.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert dumped == result
    assert answer["id"] == 7 and answer["jsonrpc"] == "2.0"
    assert result["capabilities"] == {"tools": {}, "experimental": {"claude/channel": {}}}
    assert result["serverInfo"]["name"] == "agent-salon"
    assert result["protocolVersion"] == version


def test_initialize_results_do_not_share_mutable_capabilities():
    first = greeting.initialize_result("2025-11-25")
    first["capabilities"]["tools"]["listChanged"] = True
    second = greeting.initialize_result("2025-11-25")
    assert second["capabilities"]["tools"] == {}


def test_the_first_line_of_stdio_is_answered_only_when_it_is_plainly_initialize():
    import io

    init = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize",'
        b'"params":{"protocolVersion":"2025-06-18"}}\n'
    )
    out = io.BytesIO()
    assert greeting.answer_first_line(io.BytesIO(init), out, 1000) == ("2025-06-18", b"")
    assert json.loads(out.getvalue())["result"]["protocolVersion"] == "2025-06-18"
    for line in (
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
        b'{"jsonrpc":"2.0","id":true,"method":"initialize"}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","extra":1}\n',
        b"not json\n",
        b'{"jsonrpc":"2.0","id":1,"method":"initialize"}',  # stdin ended mid-line
        init.replace(b'"2025-06-18"', b'"' + b"9" * 300 + b'"'),  # longer than allowed
    ):
        out = io.BytesIO()
        version, rest = greeting.answer_first_line(io.BytesIO(line), out, 200)
        assert (version, out.getvalue()) == (None, b"")
        assert rest and line.startswith(rest)


def test_result_message_wraps_the_result():
    assert p.result_message("x", {"tools": []}) == {
        "jsonrpc": "2.0",
        "id": "x",
        "result": {"tools": []},
    }


def test_error_message_omits_data_when_none():
    assert p.error_message(1, METHOD_NOT_FOUND, "unknown method 'foo'") == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32601, "message": "unknown method 'foo'"},
    }


def test_error_message_includes_data_when_given():
    message = p.error_message(None, INTERNAL_ERROR, "internal error", data={"ref": "e1"})
    assert message["error"] == {"code": -32603, "message": "internal error", "data": {"ref": "e1"}}


def test_a_tool_result_carries_json_text_and_structured_content():
    assert p.tool_result({"id": "e1", "wakes": ["api#c4e1"]}) == {
        "content": [{"type": "text", "text": '{"id": "e1", "wakes": ["api#c4e1"]}'}],
        "structuredContent": {"id": "e1", "wakes": ["api#c4e1"]},
        "isError": False,
    }


def test_a_tool_result_text_keeps_non_ascii():
    assert p.tool_result({"t": "café"})["content"][0]["text"] == '{"t": "café"}'


def test_a_list_tool_result_is_wrapped_in_items():
    result = p.tool_result(["team", "salon"])
    assert (result["structuredContent"], result["content"][0]["text"]) == (
        {"items": ["team", "salon"]},
        '{"items": ["team", "salon"]}',
    )


def test_a_tool_result_can_carry_its_own_text():
    result = p.tool_result({"n": 1}, text="one entry")
    assert result["content"] == [{"type": "text", "text": "one entry"}]


def test_a_tool_result_can_be_an_error():
    assert p.tool_result({"tampered": True}, is_error=True)["isError"] is True


def test_tool_error_text_is_the_message():
    assert p.tool_error("room 'tem' does not exist; rooms: salon, team") == {
        "content": [{"type": "text", "text": "room 'tem' does not exist; rooms: salon, team"}],
        "structuredContent": {"error": "room 'tem' does not exist; rooms: salon, team"},
        "isError": True,
    }


def test_progress_notification_has_token_and_progress():
    assert p.progress_notification("tok", 3) == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "tok", "progress": 3},
    }


def test_progress_notification_carries_message_and_total_when_given():
    message = p.progress_notification(7, 0.5, "still waiting", total=1.0)
    assert message["params"] == {
        "progressToken": 7,
        "progress": 0.5,
        "total": 1.0,
        "message": "still waiting",
    }


def test_the_progress_token_is_read_from_params_meta():
    assert p.progress_token({"name": "wait", "_meta": {"progressToken": "pt-1"}}) == "pt-1"


def test_no_meta_means_no_progress_token():
    assert p.progress_token({"name": "wait"}) is None


def test_a_boolean_progress_token_is_ignored():
    assert p.progress_token({"_meta": {"progressToken": True}}) is None


def test_encode_message_is_compact_utf8_on_one_line():
    assert p.encode_message({"a": "é\nb", "n": [1, 2]}) == '{"a":"é\\nb","n":[1,2]}'.encode()


def test_encode_message_survives_a_lone_surrogate():
    assert p.encode_message({"t": "\ud800é"}) == b'{"t":"\\ud800\\u00e9"}'


# ---------------------------------------------------------------- argument validation

SEND_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1, "maxLength": 10},
        "room": {"type": "string"},
        "type": {"type": "string", "enum": ["QUESTION", "ANSWER", "FACT", "REQUEST"]},
        "to": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "timeout": {"type": "number", "maximum": 300},
        "advance": {"type": "boolean"},
        "meta": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["text"],
    "additionalProperties": False,
}


def test_valid_arguments_give_no_messages():
    args = {
        "text": "hi",
        "type": "FACT",
        "to": ["api"],
        "limit": 5,
        "timeout": 2.5,
        "advance": False,
        "meta": {"kind": "question"},
    }
    assert validate_arguments(SEND_SCHEMA, args) == []


def test_unknown_argument_is_named():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "foo": 1}) == [
        "unknown argument 'foo' — allowed: text, room, type, to, limit, timeout, advance, meta"
    ]


def test_each_unknown_argument_is_reported():
    messages = validate_arguments(
        {"type": "object", "properties": {"a": {}}, "additionalProperties": False}, {"x": 1, "y": 2}
    )
    assert messages == [
        "unknown argument 'x' — allowed: a",
        "unknown argument 'y' — allowed: a",
    ]


def test_an_argument_to_a_tool_without_arguments_says_it_takes_none():
    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    assert validate_arguments(schema, {"room": "team"}) == [
        "unknown argument 'room' — this tool takes no arguments"
    ]


def test_unknown_arguments_pass_when_additional_properties_are_allowed():
    assert validate_arguments({"type": "object", "properties": {}}, {"x": 1}) == []


def test_a_missing_required_argument_is_named():
    assert validate_arguments(SEND_SCHEMA, {"room": "team"}) == ["missing required argument 'text'"]


def test_absent_arguments_count_as_an_empty_object():
    assert validate_arguments(SEND_SCHEMA, None) == ["missing required argument 'text'"]


def test_arguments_that_are_not_an_object_are_refused():
    assert validate_arguments(SEND_SCHEMA, ["hi"]) == ["arguments must be an object"]


def test_an_integer_argument_refuses_a_string():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "limit": "20"}) == [
        "'limit' must be an integer"
    ]


def test_bool_is_not_an_integer():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "limit": True}) == [
        "'limit' must be an integer"
    ]


def test_a_float_is_not_an_integer():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "limit": 20.0}) == [
        "'limit' must be an integer"
    ]


def test_bool_is_not_a_number():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "timeout": False}) == [
        "'timeout' must be a number"
    ]


def test_an_integer_is_a_number():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "timeout": 30}) == []


def test_a_boolean_argument_refuses_a_string():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "advance": "false"}) == [
        "'advance' must be true or false"
    ]


def test_a_string_argument_refuses_a_number():
    assert validate_arguments(SEND_SCHEMA, {"text": 5}) == ["'text' must be a string"]


def test_an_array_argument_refuses_a_string():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "to": "api"}) == ["'to' must be an array"]


def test_array_items_are_checked_and_named_by_index():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "to": ["api", 7]}) == [
        "'to[1]' must be a string"
    ]


def test_an_object_argument_refuses_an_array():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "meta": []}) == [
        "'meta' must be an object"
    ]


def test_additional_properties_schema_checks_every_extra_value():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "meta": {"a": "x", "b": 2}}) == [
        "'meta.b' must be a string"
    ]


def test_nested_object_problems_are_named_with_their_path():
    schema = {
        "type": "object",
        "properties": {
            "opts": {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
                "additionalProperties": False,
            }
        },
    }
    assert validate_arguments(schema, {"opts": {"m": 1}}) == [
        "unknown argument 'opts.m' — allowed: n",
        "missing required argument 'opts.n'",
    ]


def test_a_nested_object_without_properties_says_it_takes_no_keys():
    schema = {
        "type": "object",
        "properties": {"opts": {"type": "object", "additionalProperties": False}},
    }
    assert validate_arguments(schema, {"opts": {"m": 1}}) == [
        "unknown argument 'opts.m' — 'opts' takes no keys"
    ]


def test_an_enum_value_outside_the_list_names_the_choices():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "type": "NOTE"}) == [
        "'type' must be one of QUESTION, ANSWER, FACT, REQUEST (got 'NOTE')"
    ]


def test_an_enum_does_not_confuse_true_with_1():
    assert validate_arguments({"enum": [1, 2]}, True) == [
        "arguments must be one of 1, 2 (got true)"
    ]


def test_a_long_value_is_shortened_in_the_enum_message():
    message = validate_arguments({"enum": ["a"]}, "x" * 100)[0]
    assert message == "arguments must be one of a (got '" + "x" * 56 + "...)"


def test_minimum_is_enforced():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "limit": 0}) == [
        "'limit' must be at least 1"
    ]


def test_maximum_is_enforced():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "timeout": 300.5}) == [
        "'timeout' must be at most 300"
    ]


def test_min_length_is_enforced():
    assert validate_arguments(SEND_SCHEMA, {"text": ""}) == [
        "'text' must be at least 1 character long"
    ]


def test_max_length_is_enforced_and_reports_the_length():
    assert validate_arguments(SEND_SCHEMA, {"text": "x" * 12}) == [
        "'text' must be at most 10 characters long (got 12)"
    ]


def test_max_items_is_enforced():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "to": ["a", "b", "c", "d"]}) == [
        "'to' must have at most 3 items"
    ]


def test_min_items_is_enforced():
    assert validate_arguments({"type": "array", "minItems": 1}, []) == [
        "arguments must have at least 1 item"
    ]


def test_a_type_list_allows_null():
    schema = {"type": "object", "properties": {"re": {"type": ["string", "null"]}}}
    assert validate_arguments(schema, {"re": None}) == []


def test_a_type_list_names_every_allowed_type():
    schema = {"type": "object", "properties": {"re": {"type": ["string", "null"]}}}
    assert validate_arguments(schema, {"re": 3}) == ["'re' must be a string or null"]


def test_a_wrong_type_is_reported_once_without_further_checks():
    assert validate_arguments(SEND_SCHEMA, {"text": "hi", "type": 5}) == ["'type' must be a string"]


def test_every_problem_is_reported_at_once():
    assert validate_arguments(SEND_SCHEMA, {"limit": 0, "bogus": 1}) == [
        "unknown argument 'bogus' — allowed: text, room, type, to, limit, timeout, advance, meta",
        "missing required argument 'text'",
        "'limit' must be at least 1",
    ]


def test_a_schema_keyword_beyond_the_usual_ones_is_checked_too():
    # jsonschema knows the whole draft; a keyword without our own wording keeps its own.
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}}}
    assert validate_arguments(schema, {"id": "A1"}) == ["'id': 'A1' does not match '^[a-z]+$'"]


def test_every_tool_advertises_a_valid_schema_and_is_checked_against_it():
    from jsonschema import Draft202012Validator

    from mcpgate import tools

    for tool in tools.TOOLS.values():
        Draft202012Validator.check_schema(tool.schema)
        assert tool.listing()["inputSchema"] == tool.schema


def test_every_tool_says_it_destroys_nothing_and_the_readers_that_they_write_nothing():
    """Codex CLI's default approval runs a tool without asking only when its annotations
    say so (a read-only tool, or neither destructive nor open-world): without them every
    tool call of a headless `codex exec` was refused."""
    from mcpgate import tools

    shown = {name: tool.listing()["annotations"] for name, tool in tools.TOOLS.items()}

    assert {name for name, a in shown.items() if not a["readOnlyHint"]} == tools.WRITE_TOOLS
    assert {(a["destructiveHint"], a["openWorldHint"]) for a in shown.values()} == {(False, False)}
    assert shown["inbox"]["readOnlyHint"] and shown["search"]["readOnlyHint"]


# ---------------------------------------------------------------- meta keys


def test_a_valid_meta_key_is_unchanged():
    assert p.sanitize_meta_key("chat_id2") == "chat_id2"


def test_a_hyphen_becomes_an_underscore():
    assert p.sanitize_meta_key("x-request-id") == "x_request_id"


def test_other_bad_characters_become_underscores():
    assert p.sanitize_meta_key("a.b c/d") == "a_b_c_d"


def test_non_ascii_letters_become_underscores():
    assert p.sanitize_meta_key("café") == "caf_"


def test_a_leading_digit_gets_an_underscore_prefix():
    assert p.sanitize_meta_key("2fa") == "_2fa"


def test_an_empty_key_becomes_an_underscore():
    assert p.sanitize_meta_key("") == "_"


@pytest.mark.parametrize("key", ["", "-", "9", "a-b", "ünï", "x y", "__", "a\nb", "Z9_z"])
def test_every_sanitized_key_matches_what_claude_code_keeps(key):
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p.sanitize_meta_key(key))


# ---------------------------------------------------------------- channel notification


def test_a_channel_notification_has_the_claude_channel_shape():
    assert p.channel_notification("hello", {"room": "team", "type": "FACT"}) == {
        "jsonrpc": "2.0",
        "method": "notifications/claude/channel",
        "params": {"content": "hello", "meta": {"room": "team", "type": "FACT"}},
    }


def test_meta_values_are_all_strings():
    meta = {"n": 3, "x": 1.5, "ok": True, "to": ["a", "b"], "d": {"k": [1]}, "s": "s"}
    assert p.channel_notification("c", meta)["params"]["meta"] == {
        "n": "3",
        "x": "1.5",
        "ok": "true",
        "to": "a,b",
        "d": '{"k":[1]}',
        "s": "s",
    }


def test_false_becomes_the_string_false():
    assert p.channel_notification("c", {"urgent": False})["params"]["meta"] == {"urgent": "false"}


def test_a_mixed_list_becomes_compact_json():
    assert p.channel_notification("c", {"v": ["a", 1]})["params"]["meta"] == {"v": '["a",1]'}


def test_a_dict_value_keeps_non_ascii_in_its_json():
    assert p.channel_notification("c", {"d": {"t": "é"}})["params"]["meta"] == {"d": '{"t":"é"}'}


def test_a_datetime_becomes_iso_text():
    ts = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    assert p.channel_notification("c", {"ts": ts})["params"]["meta"] == {
        "ts": "2026-01-02T03:04:05.678000+00:00"
    }


def test_a_uuid_becomes_its_plain_text():
    value = uuid.UUID("0190f5a2-0000-7000-8000-000000000001")
    assert p.channel_notification("c", {"id": value})["params"]["meta"] == {
        "id": "0190f5a2-0000-7000-8000-000000000001"
    }


def test_none_and_empty_values_are_omitted():
    meta = {"re": None, "to": "", "room": "team"}
    assert p.channel_notification("c", meta)["params"]["meta"] == {"room": "team"}


def test_an_empty_addressee_list_is_omitted():
    assert p.channel_notification("c", {"to": []})["params"]["meta"] == {}


def test_a_hyphenated_meta_key_is_renamed_not_lost():
    assert p.channel_notification("c", {"chat-id": "42"})["params"]["meta"] == {"chat_id": "42"}


def test_colliding_keys_keep_both_values_with_a_suffix():
    meta = {"chat_id": "first", "chat-id": "second"}
    assert p.channel_notification("c", meta)["params"]["meta"] == {
        "chat_id": "first",
        "chat_id_2": "second",
    }


def test_a_third_colliding_key_gets_the_next_free_suffix():
    meta = {"a_b": "1", "a-b": "2", "a.b": "3"}
    assert p.channel_notification("c", meta)["params"]["meta"] == {
        "a_b": "1",
        "a_b_2": "2",
        "a_b_3": "3",
    }


def test_a_suffix_never_overwrites_an_existing_key():
    meta = {"a_b": "1", "a_b_2": "2", "a-b": "3"}
    assert p.channel_notification("c", meta)["params"]["meta"] == {
        "a_b": "1",
        "a_b_2": "2",
        "a_b_3": "3",
    }


# ---------------------------------------------------------------- server-sent events


def test_an_sse_event_has_id_event_and_one_data_line():
    event = p.sse_event({"jsonrpc": "2.0", "method": "m"}, "e-17")
    assert event == b'id: e-17\nevent: message\ndata: {"jsonrpc":"2.0","method":"m"}\n\n'


def test_an_sse_event_without_id_has_no_id_field():
    assert p.sse_event({"a": 1}) == b'event: message\ndata: {"a":1}\n\n'


def test_newlines_in_content_stay_inside_one_data_line():
    event = p.sse_event(p.channel_notification("line one\nline two\r\n", {}), "1")
    assert event.count(b"\n") == 4 and b"\r" not in event


def test_unicode_line_separators_are_escaped_in_sse_data():
    event = p.sse_event({"t": "a\u2028b\u2029c\x85d"})
    assert event == b'event: message\ndata: {"t":"a\\u2028b\\u2029c\\u0085d"}\n\n'


def test_sse_data_round_trips_to_the_same_message():
    message = p.channel_notification("é \u2028 \n ok", {"to": ["a", "b"]})
    data = p.sse_event(message, "9").decode().split("data: ", 1)[1]
    assert json.loads(data) == message


def test_an_event_id_with_a_newline_is_refused():
    with pytest.raises(ValueError, match="an SSE event id cannot contain CR, LF or NUL"):
        p.sse_event({}, "1\n2")


def test_sse_comment_default_is_a_bare_colon():
    assert p.sse_comment() == b":\n\n"


def test_sse_comment_carries_its_text():
    assert p.sse_comment("keep-alive") == b": keep-alive\n\n"


def test_a_multiline_sse_comment_stays_a_comment():
    assert p.sse_comment("a\nb") == b": a\n: b\n\n"


def test_a_shared_message_is_encoded_once_and_exactly_as_a_plain_one():
    """A broadcast's push is one message for every stream: its JSON is made once."""
    message = p.channel_notification("line\u2028break é", {"type": "QUESTION", "id": "1"})
    shared = p.SharedMessage(message)
    first = p.encode_message(shared)
    assert first == p.encode_message(message)
    assert p.encode_message(shared) is first
    assert p.sse_event(shared, "7") == p.sse_event(message, "7")
