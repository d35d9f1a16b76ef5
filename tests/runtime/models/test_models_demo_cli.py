"""``evs demo --model openai-compatible:URL:MODEL``: the demo agent on a live (local) endpoint."""

from __future__ import annotations

from _extras import require_extra

sdk = require_extra("openai", "openai")

from pathlib import Path  # noqa: E402

import orjson  # noqa: E402
from _wire import Wire, fixture  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from runtime.cli import app  # noqa: E402

PATH = "/v1/chat/completions"


def test_demo_runs_the_whole_protocol_on_a_live_endpoint(tmp_path: Path, wire: Wire) -> None:
    for reply in fixture("openai_weather.json"):
        wire.reply(PATH, reply)
    db = tmp_path / "demo.db"
    spec = f"openai-compatible:{wire.url('/v1')}:llama3.2:3b"
    result = CliRunner().invoke(
        app,
        ["demo", "--approve", "--db", str(db), "--model", spec],
        env={"OPENAI_API_KEY": ""},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert '→ get_weather(city="Paris")' in out
    assert "no station in Atlantis" in out
    assert "Approving confirm-" in out
    assert "through the respond API" in out
    assert '→ load_artifacts(artifact_names=["paris-forecast.md"])' in out
    assert "Done: session demo-" in out
    assert len(wire.bodies) == 5
    assert {b["model"] for b in wire.bodies} == {"llama3.2:3b"}
    # The instructions lead the model through the protocol, step by step.
    system = wire.bodies[0]["messages"][0]["content"]
    for step in (
        "same turn (parallel calls)",
        "paid_forecast",
        "long_range_outlook",
        "load_artifacts",
    ):
        assert step in system
    sessions = CliRunner().invoke(app, ["sessions", "--db", str(db), "--json"])
    [session] = orjson.loads(sessions.stdout)["sessions"]
    shown = CliRunner().invoke(app, ["show", session["id"], "--db", str(db), "--json"])
    assert orjson.loads(shown.stdout)["events"][-1]["text"].startswith("Paris: 22°C")
