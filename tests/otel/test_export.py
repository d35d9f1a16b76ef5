"""``evs export --format otlp`` end to end: a demo session to a local OTLP/HTTP endpoint
(decoded with the official protobuf types) and to OTLP/JSON files."""

from __future__ import annotations

import base64
import logging
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from _extras import require_extra

require_extra("opentelemetry.sdk.trace", "otel")
require_extra("pytest_httpserver", "dev")

from _cli_support import evs_subprocess, invoke  # noqa: E402
from google.protobuf.json_format import ParseDict  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status  # noqa: E402
from pytest_httpserver import HTTPServer  # noqa: E402
from werkzeug import Request, Response  # noqa: E402

from eventstore.otel._sdk import _why  # noqa: E402

SpanMap = dict[bytes, Span]


def _attrs(span: Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in list(span.attributes):
        which = kv.value.WhichOneof("value")
        value = getattr(kv.value, which)
        out[kv.key] = list(value.values) if which == "array_value" else value
    return out


def _spans(request: ExportTraceServiceRequest) -> list[Span]:
    return [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def _receive(httpserver: HTTPServer, db: Path, session: str) -> list[bytes]:
    bodies: list[bytes] = []

    def handler(request: Request) -> Response:
        assert request.headers["Content-Type"] == "application/x-protobuf"
        bodies.append(request.get_data())
        return Response(b"", status=200)

    httpserver.expect_request("/v1/traces", method="POST").respond_with_handler(handler)
    result = invoke("export", session, "--db", str(db), "--format", "otlp",
                    "--endpoint", httpserver.url_for("/"))
    assert result.exit_code == 0, result.output
    assert "span(s)" in result.stderr
    return bodies


def test_endpoint_receives_genai_spans(httpserver: HTTPServer,
                                       demo_db: tuple[Path, str]) -> None:
    db, session = demo_db
    bodies = _receive(httpserver, db, session)
    assert len(bodies) == 1
    request = ExportTraceServiceRequest.FromString(bodies[0])
    resource = {kv.key: kv.value.string_value
                for kv in request.resource_spans[0].resource.attributes}
    assert resource == {"service.name": "weather-demo"}
    assert request.resource_spans[0].scope_spans[0].scope.name == "agent-eventstore"
    spans = _spans(request)
    roots = [s for s in spans if not s.parent_span_id]
    # The demo runs three invocations: the first call round, the approved call, the summary.
    assert [s.name for s in roots] == ["invoke_agent weather_agent"] * 3
    assert len({s.trace_id for s in roots}) == 3
    by_id = {s.span_id: s for s in spans}
    for span in spans:
        attrs = _attrs(span)
        assert attrs["gen_ai.conversation.id"] == session
        if span.parent_span_id:
            parent = by_id[span.parent_span_id]
            assert not parent.parent_span_id
            assert parent.trace_id == span.trace_id
            assert parent.name == "invoke_agent weather_agent"
        assert span.end_time_unix_nano >= span.start_time_unix_nano
    names = [s.name for s in spans]
    assert names.count("chat") == 5
    assert all(s.kind == Span.SPAN_KIND_CLIENT for s in spans if s.name == "chat")
    tools = {_attrs(s)["gen_ai.tool.call.id"]: s for s in spans
             if s.name.startswith("execute_tool ")}
    assert {k: v.name for k, v in tools.items()} == {
        "call-paris": "execute_tool get_weather", "call-atlantis": "execute_tool get_weather",
        "call-forecast": "execute_tool paid_forecast",
        "call-outlook": "execute_tool long_range_outlook",
        "call-load": "execute_tool load_artifacts"}
    atlantis, paris = tools["call-atlantis"], tools["call-paris"]
    assert _attrs(atlantis)["error.type"] == "execution_failed"
    assert atlantis.status.code == Status.STATUS_CODE_ERROR
    assert "no station in Atlantis" in atlantis.status.message
    assert "error.type" not in _attrs(paris)
    assert paris.status.code == Status.STATUS_CODE_UNSET
    forecast = tools["call-forecast"]
    assert [e.name for e in forecast.events] == [
        "evs.tool.started", "evs.confirmation.requested", "evs.confirmation.answered",
        "evs.tool.started"]
    answered = {kv.key: kv.value for kv in forecast.events[2].attributes}
    assert answered["evs.confirmation.confirmed"].bool_value is True
    # The paid call was asked in the first invocation and ran after the approval.
    assert forecast.trace_id == paris.trace_id
    assert forecast.end_time_unix_nano > by_id[forecast.parent_span_id].end_time_unix_nano
    assert _attrs(tools["call-outlook"])["evs.tool.long_running"] is True


def test_second_export_is_identical(httpserver: HTTPServer, demo_db: tuple[Path, str],
                                    tmp_path: Path) -> None:
    db, session = demo_db
    first = _receive(httpserver, db, session)
    httpserver.clear()
    second = _receive(httpserver, db, session)
    assert first == second
    files = []
    for name in ("a.jsonl", "b.jsonl"):
        out = tmp_path / name
        result = invoke("export", session, "--db", str(db), "--format", "otlp", "-o", str(out))
        assert result.exit_code == 0, result.output
        assert re.fullmatch(rf"Wrote \d+ span\(s\) of 1 session\(s\) to {re.escape(str(out))}\.\n",
                            result.stdout), result.stdout
        files.append(out.read_bytes())
    assert files[0] == files[1]
    # The OTLP/JSON line is the same request as the protobuf one (ids in hex, per OTLP/JSON).
    message = orjson.loads(files[0])
    for span in (s for rs in message["resourceSpans"] for ss in rs["scopeSpans"]
                 for s in ss["spans"]):
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:
                assert len(span[key]) in (16, 32)
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    decoded = ParseDict(message, ExportTraceServiceRequest())
    assert decoded == ExportTraceServiceRequest.FromString(first[0])


def test_app_since_selects_sessions(demo_db: tuple[Path, str], tmp_path: Path) -> None:
    db, _ = demo_db
    assert invoke("demo", "--approve", "--db", str(db)).exit_code == 0
    past = invoke("export", "--db", str(db), "--format", "otlp", "--app", "weather-demo",
                  "--since", "2020-01-01")
    assert past.exit_code == 0, past.output
    lines = past.stdout_bytes.splitlines()
    assert len(lines) == 2
    future = invoke("export", "--db", str(db), "--format", "otlp", "--app", "weather-demo",
                    "--since", "2999-01-01T00:00:00+00:00")
    assert future.exit_code == 0
    assert future.stdout_bytes == b""
    other = invoke("export", "--db", str(db), "--format", "otlp", "--app", "nope")
    assert other.exit_code == 0
    assert other.stdout_bytes == b""


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--format", "otlp"], "Give either SESSION_ID or --app", id="nothing"),
    pytest.param(["s1", "--since", "2020-01-01"], "only apply to --format otlp",
                 id="since-on-jsonl"),
    pytest.param(["--format", "xml", "s1"], "--format must be jsonl or otlp", id="format"),
    pytest.param(["--format", "otlp", "--app", "a", "--since", "yesterday"],
                 "not an ISO date", id="since"),
    pytest.param(["--format", "otlp", "s1", "-o", "x", "--endpoint", "http://127.0.0.1:1"],
                 "either --output or --endpoint", id="both-sinks"),
    pytest.param([], "Missing argument SESSION_ID", id="jsonl-needs-session"),
])
def test_bad_option_combinations(demo_db: tuple[Path, str], args: list[str],
                                 message: str) -> None:
    db, _ = demo_db
    result = invoke("export", "--db", str(db), *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_refusing_endpoint_is_one_line_error(httpserver: HTTPServer,
                                             demo_db: tuple[Path, str]) -> None:
    db, session = demo_db
    httpserver.expect_request("/v1/traces").respond_with_data("no", status=400)
    result = invoke("export", session, "--db", str(db), "--format", "otlp",
                    "--endpoint", httpserver.url_for("/v1/traces"))
    assert result.exit_code == 1
    assert "did not accept the spans" in result.stderr


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_unreachable_endpoint_is_one_line_on_stderr(demo_db: tuple[Path, str]) -> None:
    """The exporter's retry warnings are not printed: the one error line says what they said."""
    db, session = demo_db
    done = evs_subprocess("export", session, "--db", str(db), "--format", "otlp",
                          "--endpoint", f"http://127.0.0.1:{_closed_port()}",
                          env={"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "1.5"})
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert re.fullmatch(
        r"evs: error: The OTLP endpoint http://127\.0\.0\.1:\d+/v1/traces did not accept the "
        r"spans: Connection refused( \(after \d+ attempts\))?\. Nothing was sent \(session "
        + re.escape(session) + r"\)\.", line), line


def test_refused_export_of_an_app_says_by_count_what_was_sent(
    httpserver: HTTPServer, demo_db: tuple[Path, str]
) -> None:
    db, _ = demo_db
    assert invoke("demo", "--approve", "--db", str(db)).exit_code == 0
    seen: list[int] = []

    def first_only(request: Request) -> Response:
        seen.append(len(request.get_data()))
        return Response(b"", status=200 if len(seen) == 1 else 400)

    httpserver.expect_request("/v1/traces", method="POST").respond_with_handler(first_only)
    result = invoke("export", "--db", str(db), "--format", "otlp", "--app", "weather-demo",
                    "--endpoint", httpserver.url_for("/"))
    assert result.exit_code == 1
    assert len(seen) == 2
    assert re.search(r"did not accept the spans: HTTP 400 BAD REQUEST\. Session \S+ was not "
                     r"sent; the session before it was \(\d+ span\(s\)\)\.$",
                     result.stderr.strip()), result.stderr


def test_eventstore_and_its_cli_import_without_opentelemetry() -> None:
    code = ("import sys, eventstore, eventstore.commands._maintain; "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).parents[2])
    assert done.stdout.strip() == "[]"


def _record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("exporter", logging.ERROR, __file__, 1, message, args, None)


@pytest.mark.parametrize("failed", [
    _record("Failed to export span batch code: %s, reason: %s", 400, "BAD REQUEST"),  # <= 1.44
    _record("Failed to export %s batch code: %s, reason: %s", "span", 400, "BAD REQUEST"),
])
def test_the_reason_is_read_from_either_exporter_s_words(failed: logging.LogRecord) -> None:
    transient = _record("Transient error %s encountered while exporting %s batch, retrying in "
                        "%.2fs.", "Service Unavailable", "span", 0.5)
    assert _why([failed]) == ": HTTP 400 BAD REQUEST"
    assert _why([transient, failed]) == ": HTTP 400 BAD REQUEST (after 2 attempts)"
    assert _why([]) == ""
