"""The CLI on PostgreSQL: migrations, inspection, verification, answers, export/import, tail."""

from __future__ import annotations

import orjson
import pytest
from _cli_support import (
    FINISHING_ARTIFACTS,
    finishing_log,
    invoke,
    make_session,
    paused_weather_log,
)

from eventstore._migrate import head_revision

pytestmark = pytest.mark.postgres


def test_cli_on_postgres(empty_postgres_url: str) -> None:
    url = empty_postgres_url
    behind = invoke("sessions", "--db", url)
    assert behind.exit_code == 1
    assert "Upgrade it with: evs db upgrade" in behind.stderr
    assert "no schema" in invoke("db", "current", "--db", url).stdout

    upgraded = invoke("db", "upgrade", "--db", url)
    assert upgraded.exit_code == 0, upgraded.stderr
    current = orjson.loads(invoke("db", "current", "--db", url, "--json").stdout)
    assert current["current"] == head_revision()

    make_session(url, paused_weather_log(), state={"units": "metric"})
    make_session(url, paused_weather_log() + finishing_log(), session_id="s2",
                 artifacts=FINISHING_ARTIFACTS)
    listed = orjson.loads(invoke("sessions", "--db", url, "--json", "--limit", "1", "--sort",
                                 "id").stdout)
    assert [s["id"] for s in listed["sessions"]] == ["s1"]
    assert listed["next_cursor"] == "s1"

    shown = invoke("show", "s1", "--db", url)
    assert shown.exit_code == 0, shown.stderr
    assert "awaiting confirmation" in shown.stdout
    assert orjson.loads(invoke("state", "s1", "--db", url, "--at", "5", "--json").stdout)[
        "state"] == {"units": "metric", "last_city": "Paris", "user:units": "metric"}
    assert invoke("verify", "--db", url).exit_code == 0

    confirmed = invoke("confirm", "s1", "confirm-1", "--yes", "--db", url)
    assert confirmed.exit_code == 0, confirmed.stderr
    responded = invoke("respond", "s1", "c4", "--result", '{"days": []}', "--db", url)
    assert responded.exit_code == 0, responded.stderr
    tailed = invoke("tail", "s1", "--db", url, "--after", "9", "--timeout", "1", "--json")
    assert [orjson.loads(line)["seq"] for line in tailed.stdout.splitlines()] == [10, 11]

    exported = invoke("export", "s2", "--db", url)
    imported = invoke("import", "-", "--db", url, "--session-id", "s3",
                      input=exported.stdout)
    assert imported.exit_code == 0, imported.stderr
    assert (invoke("export", "s3", "--db", url).stdout.splitlines()[1:]
            == exported.stdout.splitlines()[1:])
    assert "already exists" in invoke("import", "-", "--db", url, input=exported.stdout).stderr
