"""Judge probes as a user runs them: `flask-eval probe` dispatched through Redis to a real
worker process, the simulator's credulous judge found out by the card and an unbiased one
cleared, `card --gate` as a CI check (exit 1 over its threshold, 0 under it, 2 for a bad
threshold), `--dry-run` writing nothing, a rerun paying for nothing, and the twins
marked in the ledger and its export but in no model's scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval.simulator.config import JudgeTraits, SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval, wait_done, workers

pytestmark = pytest.mark.e2e

JUDGES = {"credulous": JudgeTraits(injection=0.6), "plain": JudgeTraits()}


def _probe(env: dict[str, str], *extra: str) -> list[str]:
    return [
        "probe",
        "--instances", str(EXAMPLES / "instances.jsonl"),
        "--responses", f"a={EXAMPLES / 'model_a.jsonl'}",
        "--responses", f"b={EXAMPLES / 'model_b.jsonl'}",
        "--judge", "credulous=openai/credulous",
        "--judge", "plain=openai/plain",
        "--probes", "inject,style",
        "--run", "probed",
        *extra,
    ]  # fmt: skip


def test_a_probe_run_through_workers_finds_the_credulous_judge(
    tmp_path: Path, redis_url: str
) -> None:
    db = tmp_path / "ledger.db"
    with running_simulator(SimConfig(judges=JUDGES)) as sim:
        env = cli_env(f"sqlite:///{db}", redis_url, OPENAI_BASE_URL=sim.openai_base_url)
        dry = flask_eval(*_probe(env, "--dry-run"), env=env)
        assert "probes: inject, style; 3 twin(s) of each response" in dry.stderr
        assert "dry run of probed" in dry.stdout and not db.exists()
        started = flask_eval(*_probe(env, "--no-wait", "--quiet"), env=env)
        assert "run probed created" in started.stderr
        with workers(env, processes=1, in_flight=32, log=tmp_path / "w.log"):
            st = wait_done(env, "probed", timeout=240)
            # 27 + 25 responses, 3 criteria each, x (1 + 3 twins) x 2 judges
            assert st["done"] == st["total"] == (27 + 25) * 3 * 4 * 2
            asked = sim.stats()["requests"]
            again = flask_eval(*_probe(env, "--quiet"), env=env)
            assert sim.stats()["requests"] == asked  # nothing paid twice
        assert "run probed resumed: 0 judge calls dispatched" in again.stderr
        assert "Judge card of probed" in again.stdout
    card = json.loads(flask_eval("card", "probed", "--format", "json", env=env).stdout)
    effects = {(e["judge"], e["probe"]): e for j in card["judges"] for e in j["effects"]}
    obeyed = effects[("credulous", "inject-score obeyed")]
    assert obeyed["significant"] and obeyed["low"] < 0.6 < obeyed["high"]
    assert not any(e["significant"] for (judge, _), e in effects.items() if judge == "plain")
    assert effects[("credulous", "style")]["estimate"] == 0
    # the gate: a CI check
    over = flask_eval("card", "probed", "--gate", "inject=0.2", env=env, check=False)
    assert over.returncode == 1 and "credulous inject-score obeyed" in over.stderr
    under = flask_eval("card", "probed", "--gate", "inject=0.9", env=env, check=False)
    assert under.returncode == 0
    bad = flask_eval("card", "probed", "--gate", "inject", env=env, check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    # twins are marked in the ledger's export, and in no model's scores
    exported = [
        json.loads(x) for x in flask_eval("export", "probed", env=env).stdout.split("\n") if x
    ]
    assert {r["model"] for r in exported} == {
        m for base in "ab" for m in (base, f"{base}~style", f"{base}~inject-score",
                                     f"{base}~inject-instruction")
    }  # fmt: skip
    report = json.loads(flask_eval("report", "probed", "--format", "json", env=env).stdout)
    assert {r["model"] for r in report["rows"]} == {"a", "b"}
    assert "~" not in flask_eval("report", "probed", env=env).stdout  # leaderboard, coverage
    (listed,) = [x for x in flask_eval("runs", env=env).stdout.splitlines() if "probed" in x]
    assert listed.split()[3:5] == ["2", "2"]  # models, judges
    html = tmp_path / "html"
    flask_eval("report", "probed", "--format", "html", "--out", str(html), env=env)
    page = (html / "report.html").read_text()
    assert "Judge card" in page and "inject-score obeyed" in page
