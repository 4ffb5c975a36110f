"""The error contract through the CLI: one line naming file:line, exit 2, nothing written.

Every case of the bad-input corpus (tests/bad_input_cases.py) plus flag and judge errors
runs through `flask-eval run` with a real Redis broker configured: the database file must
not exist afterwards and Redis must hold no key.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from flask_eval.cli import main
from tests.bad_input_cases import CASES, GOOD_A, GOOD_INSTANCES, REPO_ROOT, BadCase

JUDGE = "openai/judge@http://127.0.0.1:9/v1"

FLAG_CASES = [
    BadCase("unknown-provider", GOOD_INSTANCES, [GOOD_A], "", "unknown judge provider 'gemini'"),
    BadCase("judge-without-model", GOOD_INSTANCES, [GOOD_A], "", "expected provider/model"),
    BadCase("bad-base-url", GOOD_INSTANCES, [GOOD_A], "", "invalid base URL"),
    BadCase("credentials-in-url", GOOD_INSTANCES, [GOOD_A], "", "credentials in the base URL"),
    BadCase("duplicate-judge", GOOD_INSTANCES, [GOOD_A], "", "judge given twice"),
    BadCase("missing-rubrics-file", GOOD_INSTANCES, [GOOD_A], "no/such/rubrics.yaml", "not found"),
]
FLAG_ARGS = {
    "unknown-provider": ["--judge", "gemini/pro"],
    "judge-without-model": ["--judge", "openai"],
    "bad-base-url": ["--judge", "openai/m@ftp://x"],
    "credentials-in-url": ["--judge", "openai/m@http://user:pw@127.0.0.1:1/v1"],
    "duplicate-judge": ["--judge", JUDGE, "--judge", JUDGE],
    "missing-rubrics-file": ["--judge", JUDGE, "--rubrics", "no/such/rubrics.yaml"],
}


def invoke(case: BadCase, db: Path, redis_url: str, extra: list[str]) -> tuple[int, str]:
    args = ["run", "--instances", case.instances]
    for r in case.responses:
        args += ["--responses", r]
    args += extra or ["--judge", JUDGE]
    env = {
        "FLASK_EVAL_DATABASE_URL": f"sqlite:///{db}",
        "FLASK_EVAL_BROKER_URL": redis_url,
        "OPENAI_API_KEY": "sk-test-key",
    }
    result = CliRunner().invoke(main, args, env=env)
    return result.exit_code, result.stderr


@pytest.mark.parametrize("case", CASES + FLAG_CASES, ids=lambda c: c.id)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    case: BadCase, tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    db = tmp_path / "flask-eval.db"
    code, err = invoke(case, db, redis_url, FLAG_ARGS.get(case.id, []))
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    expected_prefix = f"error: {case.where}: " if case.where else "error: "
    assert lines[0].startswith(expected_prefix), lines[0]
    assert case.message in lines[0]
    assert not db.exists(), "the database was written"
    assert redis.Redis.from_url(redis_url).dbsize() == 0, "something reached Redis"


def test_corpus_is_large_enough() -> None:
    assert len(CASES) + len(FLAG_CASES) >= 30


def test_reusing_a_run_name_with_other_inputs_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conflicting run: exit 2 and the stored run is left as it was."""
    from simulator.testing import running_simulator

    monkeypatch.chdir(REPO_ROOT)
    db = tmp_path / "x.db"
    env = {"FLASK_EVAL_DATABASE_URL": f"sqlite:///{db}", "OPENAI_API_KEY": "sk-test-key"}
    with running_simulator() as sim:
        base = [
            "run",
            "--instances",
            GOOD_INSTANCES,
            "--responses",
            GOOD_A,
            "--run",
            "same",
            "--quiet",
        ]
        first = CliRunner().invoke(
            main, [*base, "--judge", f"openai/a@{sim.openai_base_url}"], env=env
        )
        assert first.exit_code == 0, first.stderr
        before = CliRunner().invoke(main, ["status", "same", "--json"], env=env).stdout
        second = CliRunner().invoke(
            main, [*base, "--judge", f"openai/b@{sim.openai_base_url}"], env=env
        )
    assert second.exit_code == 2
    assert "exists with different inputs" in second.stderr
    assert CliRunner().invoke(main, ["status", "same", "--json"], env=env).stdout == before


def test_unknown_run_and_missing_key_are_clear_errors(tmp_path: Path) -> None:
    env = {"FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp_path / 'y.db'}"}
    result = CliRunner().invoke(main, ["report", "nope"], env=env)
    assert result.exit_code == 2 and "no run named 'nope'" in result.stderr
    args = [
        "run",
        "--instances",
        str(REPO_ROOT / GOOD_INSTANCES),
        "--responses",
        f"a={REPO_ROOT}/flask_eval/examples/model_a.jsonl",
        "--judge",
        "anthropic/claude",
    ]
    result = CliRunner().invoke(
        main, args, env={**env, "ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""}
    )
    assert result.exit_code == 2 and "set ANTHROPIC_API_KEY" in result.stderr
