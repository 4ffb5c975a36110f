"""A judge naming a model its provider has retired is refused before anything is sent
(one line, exit 2); one retiring within 30 days is warned of. Dates are the model table's
(core/models.toml), checked against a clock the tests move."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from flask_eval.core import models
from flask_eval.core.errors import ConfigError
from flask_eval.workers import judge as judge_module
from flask_eval.workers.judge import spec_of
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval


def _on(monkeypatch: pytest.MonkeyPatch, day: date) -> None:
    monkeypatch.setattr(models, "today", lambda: day)
    monkeypatch.setattr(judge_module, "_WARNED", set())


def test_a_retired_model_is_refused_and_one_retiring_soon_is_warned_of(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _on(monkeypatch, date(2026, 12, 6))
    with pytest.raises(ConfigError, match=r"gemini-2\.5-flash: the model was retired on 2026"):
        spec_of("gemini/gemini-2.5-flash")
    spec_of("openai/gpt-5-2025-08-07")  # an alias of gpt-5: retires on 2026-12-11
    spec_of("openai/gpt-5-2025-08-07")  # warned once
    spec_of("openai/gpt-4o")  # 39 days left: not yet
    spec_of("openai/gpt-5.5")  # current
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        "judge openai/gpt-5-2025-08-07: the model retires on 2026-12-11 (in 5 "
        "days); use a current model instead, e.g. openai/gpt-5.4"
    ]
    _on(monkeypatch, date(2027, 1, 14))
    with pytest.raises(ConfigError, match="retired on 2027-01-14"):
        spec_of("openai/gpt-4o")
    # a server named by its base URL serves models of its own: not the provider's dates
    assert spec_of("openai/gpt-4o@http://127.0.0.1:9/v1").model == "gpt-4o"


def test_the_warning_comes_before_the_run_and_a_retired_judge_stops_it(
    monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    _on(monkeypatch, date(2026, 12, 20))
    inputs = [
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--responses",
        f"a={EXAMPLES / 'model_a.jsonl'}",
        "--limit",
        "2",
    ]
    env = cli_env(sqlite_url)
    refused = flask_eval(
        "run", *inputs, "--judge", "openai/o3", "--judge", "openai/gpt-5.4", env=env, check=False
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "error: judge openai/o3: the model was retired on 2026-12-11 (its provider refuses "
        "it); use a current model instead, e.g. openai/gpt-5.5"
    ]
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # nothing written
    dry = flask_eval("run", *inputs, "--judge", "openai/gpt-4o", "--dry-run", env=env)
    assert "judge openai/gpt-4o: the model retires on 2027-01-14 (in 25 days)" in dry.stderr
