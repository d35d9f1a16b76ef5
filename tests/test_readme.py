"""Every Python example in the README and in ``docs/*.md`` runs as written (so they stay true).

Examples are the ```` ```python ```` fenced blocks, read as CommonMark does: a fence closes only
at a line of backticks alone, so a fence that never closes, or a block holding another fence's
opening line (the sign of a missing close), is a failure of its own. A block that must not run
says so with an HTML comment, visible in the source, on the line before its fence:
``<!-- norun: why -->``; the test then skips it with that reason.

Each block runs as a script in a fresh directory, warnings as errors. No block reaches a
network: the model providers' keys are test values and their base URLs point at a local server
(pytest-httpserver, on 127.0.0.1) that answers like each provider (OpenAI Chat Completions and
Responses, Anthropic Messages, Gemini); the OpenAI Agents SDK's trace export is off. An MCP
example starts the project's own ``evs mcp-server`` (``python -m runtime.cli``).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _extras import require_extra
from pytest_httpserver import HTTPServer

from eventstore import open_store

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _documents() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("**/*.md"))]


_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^\s`]*)")
_NORUN = re.compile(r"^\s*<!--\s*norun:\s*(\S.*?)\s*-->\s*$")

_EXTRAS = {
    "google.adk": ("google.adk", "adk"),
    "agents": ("agents", "openai-agents"),
    "pydantic_ai": ("pydantic_ai", "pydantic-ai"),
    "runtime.mcp": ("mcp", "mcp"),
    "runtime.models": ("openai", "models"),
}
"""Imports of an example -> the package and extra it needs (``require_extra``)."""


@dataclass(frozen=True, slots=True)
class Block:
    """One ```` ```python ```` block of a document."""

    name: str
    """``document:line`` of its opening fence."""
    line: int
    """Line of its opening fence (1-based)."""
    code: str
    norun: str | None
    """The reason of its ``<!-- norun: … -->`` marker, if it has one."""


def parse(document: Path, *, root: Path = ROOT) -> tuple[list[Block], list[str]]:
    """Return the python blocks of ``document`` and what is wrong with its fences (places
    named relative to ``root``)."""
    lines = document.read_text(encoding="utf-8").splitlines()
    where = document.relative_to(root)
    blocks: list[Block] = []
    problems: list[str] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence, language = len(opening[1]), opening[2], opening[3]
        start, body, closed = i, [], False
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        for i in range(start + 1, len(lines)):  # i: where the block ends
            line = lines[i]
            if closing.match(line):
                closed = True
                break
            inner = _FENCE.match(line)
            if language == "python" and inner is not None and inner[3]:
                problems.append(f"{where}:{i + 1}: {line.strip()!r} inside the python block of "
                                f"line {start + 1}: is that block's closing fence missing?")
            body.append(line[indent:] if line[:indent].isspace() else line)
        if not closed:
            problems.append(f"{where}:{start + 1}: the {language or 'code'} fence never closes")
            i = len(lines)
        if language == "python":
            before = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            marker = _NORUN.match(before)
            blocks.append(Block(f"{where}:{start + 1}", start + 1, "\n".join(body) + "\n",
                                marker[1] if marker else None))
        i += 1
    return blocks, problems


def _blocks() -> list[Block]:
    return [block for document in _documents() for block in parse(document)[0]]


def test_docs_fences_all_close() -> None:
    problems = [p for document in _documents() for p in parse(document)[1]]
    assert problems == []


def test_docs_parser_finds_the_readme_examples() -> None:
    blocks, _ = parse(README)
    assert len(blocks) >= 3
    assert sum("asyncio.run(main())" in b.code for b in blocks) >= 3
    everywhere = _blocks()
    assert len(everywhere) >= 12
    assert sum("asyncio.run(main())" in b.code for b in everywhere) >= 10


def test_docs_parser_flags_an_unclosed_fence_and_honours_norun(tmp_path: Path) -> None:
    """The parser itself: the README's old breakage (a python fence left open, the next
    section's heading and fence inside it) is reported, and a marker is read."""
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "page.md"
    page.write_text("# T\n\n```python\nprint(1)\n\n## Next\n\n```python\nprint(2)\n```\n\n"
                    "<!-- norun: needs a GPU -->\n```python\nimport torch\n```\n\n"
                    "```python\nopen\n", encoding="utf-8")
    blocks, problems = parse(page, root=tmp_path)
    assert [b.line for b in blocks] == [3, 13, 17]
    assert [b.norun for b in blocks] == [None, "needs a GPU", None]
    assert problems == [
        "docs/page.md:8: '```python' inside the python block of line 3: is that block's "
        "closing fence missing?",
        "docs/page.md:17: the python fence never closes",
    ]


_TEXT = "It is sunny."

_REPLIES: dict[str, tuple[str, dict[str, Any]]] = {
    "openai chat": ("/v1/chat/completions", {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": _TEXT}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }),
    "openai responses": ("/v1/responses", {
        "id": "resp_1", "object": "response", "created_at": 0, "status": "completed",
        "model": "gpt-4o-mini", "parallel_tool_calls": True, "tool_choice": "auto",
        "tools": [],
        "output": [{"type": "message", "id": "msg_1", "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": _TEXT, "annotations": []}]}],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }),
    "anthropic": ("/v1/messages", {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": _TEXT}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
    }),
}
_GEMINI = re.compile(r"^/v1beta/models/[^/:]+:generateContent$")
_GEMINI_REPLY = {
    "candidates": [{"index": 0, "finishReason": "STOP",
                    "content": {"role": "model", "parts": [{"text": _TEXT}]}}],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
}


@pytest.fixture
def providers(httpserver_ipv4: HTTPServer) -> dict[str, str]:
    """The environment that points every provider SDK at the local stand-in server."""
    for path, body in _REPLIES.values():
        httpserver_ipv4.expect_request(path, method="POST").respond_with_json(body)
    httpserver_ipv4.expect_request(_GEMINI, method="POST").respond_with_json(_GEMINI_REPLY)
    base = httpserver_ipv4.url_for("").rstrip("/")
    return {
        "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{base}/v1",
        "ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": base,
        "GEMINI_API_KEY": "test", "GOOGLE_GEMINI_BASE_URL": base,
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }


def _run(block: Block, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for prefix, (module, extra) in _EXTRAS.items():
        if re.search(rf"^\s*(from|import) {re.escape(prefix)}\b", block.code, re.M):
            require_extra(module, extra)
    script = cwd / "example.py"
    script.write_text(block.code, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_", "EVS_"))}
    return subprocess.run(
        [sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=180,
        env={**clean, **env, "PYTHONWARNINGS": "error"},
    )


@pytest.mark.parametrize("block", [pytest.param(b, id=b.name) for b in _blocks()])
def test_docs_python_block_runs(block: Block, tmp_path: Path,
                                providers: dict[str, str]) -> None:
    if block.norun is not None:
        pytest.skip(f"norun: {block.norun}")
    done = _run(block, tmp_path, providers)
    assert done.returncode == 0, f"{block.name}\n{done.stdout}\n{done.stderr}"


def _readme_block(marker: str, *, also: str = "") -> Block:
    """The one block of the README, else of the docs, that holds ``marker`` (and ``also``)."""
    found = [b for b in parse(README)[0] if marker in b.code and also in b.code]
    if not found:
        found = [b for b in _blocks() if marker in b.code and also in b.code]
    [block] = found
    return block


def test_readme_runtime_example_runs_the_confirmed_call_once(
    tmp_path: Path, providers: dict[str, str]
) -> None:
    done = _run(_readme_block("answer_confirmation"), tmp_path, providers)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("completed Paris: 22°C")

    async def paid_results() -> list[dict[str, object]]:
        async with await open_store(tmp_path / "weather.db") as store:
            [info] = (await store.list_sessions(app_name="weather")).sessions
            return [
                r.response
                for e in await store.read(info.id)
                for r in e.function_responses()
                if r.name == "paid_forecast"
            ]

    results = asyncio.run(paid_results())
    assert [r for r in results if "summary" in r] == [
        {"city": "Paris", "days": 7, "summary": "dry, highs of 24°C"}
    ]


def test_readme_mcp_example_lists_sessions_through_evs_mcp_server(
    tmp_path: Path, providers: dict[str, str]
) -> None:
    done = _run(_readme_block("MCPToolset", also="evs_sessions"), tmp_path, providers)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("completed There is one session.")

    async def listing() -> tuple[str, list[Any]]:
        async with await open_store(tmp_path / "mcp.db") as store:
            [info] = (await store.list_sessions(app_name="mcp")).sessions
            return info.id, [r.response for e in await store.read(info.id)
                             for r in e.function_responses() if r.name == "evs_sessions"]

    session_id, [response] = asyncio.run(listing())
    # The server (another process, reading the same file) listed the session asking it.
    assert [(s["id"], s["app_name"]) for s in response["sessions"]] == [(session_id, "mcp")]


def test_readme_agents_sdk_example_talks_to_the_stand_in_server(
    tmp_path: Path, providers: dict[str, str], httpserver_ipv4: HTTPServer
) -> None:
    block = _readme_block("EventStoreSession(", also="from agents import Agent, Runner")
    done = _run(block, tmp_path, providers)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == _TEXT
    assert [r.path for r, _ in httpserver_ipv4.log] == ["/v1/responses"]


def test_otel_live_spans_example_runs_again_in_the_same_directory(
    tmp_path: Path, providers: dict[str, str]
) -> None:
    """A reader runs an example twice: the second run meets the first one's database."""
    block = _readme_block("LiveSpans(", also="live.db")
    for attempt in (1, 2):
        done = _run(block, tmp_path, providers)
        assert done.returncode == 0, f"run {attempt}\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "live.db").exists()
