"""Pairwise ranking end to end: the CLI, the judge simulator behind the real SDK, the
executor (in-process, and real Celery workers killed with -9), the ledger and the report
in every format."""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES, REPO
from tests.helpers import (
    cli_env,
    flask_eval,
    kill_group,
    status,
    wait_done,
    wait_until,
    workers,
)

PAIRWISE_DATA = (
    Path(os.environ.get("FLASK_EVAL_PROMETHEUS_DATA", REPO.parent / "shared" / "prometheus-data"))
    / "eval"
    / "benchmark"
    / "data"
)
MODELS = ("gpt4", "alpaca_13b", "vicuna_13b", "llama2_chat_13b")


def subset(flask_data: Path, tmp_path: Path, n: int) -> tuple[Path, list[str]]:
    """The first ``n`` FLASK instances and 4 of the 15 models' responses to them."""
    src = flask_data / "evaluation_set" / "flask_evaluation.jsonl"
    instances = tmp_path / "instances.jsonl"
    with src.open() as f:
        instances.write_text("".join(itertools.islice(f, n)))
    args = []
    for m in MODELS:
        path = flask_data / "model_output" / "outputs" / f"{m}.jsonl"
        if not path.exists():
            pytest.skip(f"{path.name} not available")
        out = tmp_path / f"{m}.jsonl"
        with path.open() as f:
            out.write_text("".join(itertools.islice(f, n)))
        args += ["--responses", f"{m}={out}"]
    return instances, args


def judges_yaml(tmp_path: Path, sim: Any) -> Path:
    path = tmp_path / "judges.yaml"
    path.write_text(
        f"- spec: openai/sim-gpt@{sim.openai_base_url}\n  name: ours\n"
        f"- spec: openai/prometheus-7b@{sim.openai_base_url}\n  name: prom\n"
        "  protocol: prometheus\n"
    )
    return path


def consistency(rows: list[dict[str, Any]], judge: str) -> float:
    """Share of comparisons whose verdict, in model terms, survives the swap (recomputed
    here from the export)."""
    by: dict[tuple[str, frozenset[str]], dict[tuple[str, str], int]] = defaultdict(dict)
    for r in rows:
        if r["judge"] == judge and r["status"] == "done":
            pair = frozenset((r["model"], r["model_b"]))
            by[(r["instance_id"], pair)][(r["model"], r["model_b"])] = r["score"]
    kept = total = 0
    for orders in by.values():
        if len(orders) != 2:
            continue
        (ab, v1), (_, v2) = sorted(orders.items())
        winner1 = {VERDICT_FIRST: ab[0], VERDICT_SECOND: ab[1]}.get(v1, "tie")
        winner2 = {VERDICT_FIRST: ab[1], VERDICT_SECOND: ab[0]}.get(v2, "tie")
        total += 1
        kept += winner1 == winner2
    return kept / total


def test_pairwise_all_on_flask_four_models_two_protocols_every_report_format(
    flask_data: Path, tmp_path: Path, sqlite_url: str
) -> None:
    """4 of FLASK's 15 models, 2 judges (ours and Prometheus's relative layout), every pair
    in both orders; the leaderboard, win-rate matrix and position consistency appear in
    the table, JSON, CSV and HTML reports; a 20% first-position bias shows up as the
    position consistency it implies (1 - 0.2 for Prometheus's format, which has no tie)."""
    instances, responses = subset(flask_data, tmp_path, 60)
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=3, position_bias=0.2)) as sim:
        judges = judges_yaml(tmp_path, sim)
        dry = flask_eval("run", "--instances", str(instances), *responses, "--judges",
                         str(judges), "--pairwise", "all", "--dry-run", env=env).stdout  # fmt: skip
        assert "N^2" in dry
        flask_eval("run", "--instances", str(instances), *responses, "--judges", str(judges),
                   "--pairwise", "all", "--run", "pw", "--quiet", env=env)  # fmt: skip
    st = json.loads(flask_eval("status", "pw", "--json", env=env).stdout)
    assert st["done"] == st["total"] == 60 * 12 * 2  # 6 pairs x 2 orders x 2 judges
    rows = [json.loads(x) for x in flask_eval("export", "pw", env=env).stdout.splitlines()]
    assert {r["score"] for r in rows} <= {VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE}
    assert consistency(rows, "prom") == pytest.approx(0.8, abs=0.07)
    doc = json.loads(flask_eval("report", "pw", "--format", "json", env=env).stdout)
    dims = {r["dimension"] for r in doc["rows"]}
    assert {"pairwise", "rating", "position"} <= dims
    position = {r["key"]: r for r in doc["rows"]
                if r["dimension"] == "position" and r["criterion"] == "all"}  # fmt: skip
    assert position["prom"]["mean"] == pytest.approx(consistency(rows, "prom"), abs=1e-9)
    assert position["ours"]["mean"] == pytest.approx(consistency(rows, "ours"), abs=1e-9)
    ratings = [r for r in doc["rows"] if r["dimension"] == "rating" and r["judge"] == "prom"
               and r["criterion"] == "all"]  # fmt: skip
    assert {r["key"] for r in ratings} == set(MODELS)
    assert next(r for r in ratings if r["key"] == doc["pairwise"]["anchor"])["mean"] == 1000
    table = flask_eval("report", "pw", env=env).stdout
    assert "Leaderboard | judge prom" in table and "Win-rate matrix" in table
    assert "Position bias" in table
    lines = list(csv.DictReader(io.StringIO(
        flask_eval("report", "pw", "--format", "csv", env=env).stdout)))  # fmt: skip
    assert {"pairwise", "rating", "position"} <= {x["dimension"] for x in lines}
    out = tmp_path / "html"
    flask_eval("report", "pw", "--format", "html", "--out", str(out), env=env)
    page = (out / "report.html").read_text()
    assert "Leaderboard" in page and "position" in page.lower() and "matrix" in page.lower()


def test_kill_9_of_a_worker_during_a_pairwise_run_loses_and_doubles_nothing(
    sqlite_url: str, amqp_url: str, tmp_path: Path
) -> None:
    """On RabbitMQ, which hands a dead consumer's messages to the next at once (the same
    kill on Redis, which waits out a visibility timeout, is tests/workers/
    test_reliability.py's, for absolute grading)."""
    instances = EXAMPLES / "instances.jsonl"
    responses = ["--responses", f"a={EXAMPLES / 'model_a.jsonl'}",
                 "--responses", f"b={EXAMPLES / 'model_b.jsonl'}"]  # fmt: skip
    env = cli_env(sqlite_url, amqp_url, FLASK_EVAL_LEASE_SECONDS="4",
                  FLASK_EVAL_VISIBILITY_TIMEOUT="12")  # fmt: skip
    with running_simulator(SimConfig(latency_ms=300, latency_dist="lognormal", seed=8)) as sim:
        judges = judges_yaml(tmp_path, sim)
        flask_eval("run", "--instances", str(instances), *responses, "--judges", str(judges),
                   "--pairwise", "all", "--per-criterion", "--limit", "12", "--run", "k9",
                   "--quiet", "--no-wait", env=env)  # fmt: skip
        with workers(env, processes=1, in_flight=8, log=tmp_path / "w0.log") as proc:
            progress, _ = wait_until(
                lambda: (status(env, "k9"), int(sim.stats()["in_flight"])),
                lambda seen: bool(seen[0]["done"] > 0 and seen[1] > 0),
                timeout=120,
                what="the worker to make progress with calls in flight",
            )
            assert progress["pending"] > 0
            kill_group(proc, signal.SIGKILL)
            proc.wait()
        with workers(env, processes=1, in_flight=16, log=tmp_path / "w1.log"):
            st = wait_done(env, "k9", timeout=300)
    assert st["done"] == st["total"] and st["failed"] == 0
    rows = [json.loads(x) for x in flask_eval("export", "k9", env=env).stdout.splitlines()]
    keys = {(r["model"], r["model_b"], r["instance_id"], r["skill"], r["judge"]) for r in rows}
    assert len(keys) == len(rows) == st["total"]
    assert all(r["model_b"] for r in rows)


def test_auto_j_and_hhh_accuracy_against_the_labels_by_hand(
    tmp_path: Path, sqlite_url: str
) -> None:
    """An imported labelled set, judged in both orders: the report's accuracy (with ties,
    and without the comparisons labelled a tie) equals a hand count from the export, with
    a swap that flips the verdict counted as a tie."""
    autoj = PAIRWISE_DATA / "autoj_pairwise.json"
    hhh = PAIRWISE_DATA / "hhh_alignment_eval.json"
    if not autoj.exists() or not hhh.exists():
        pytest.skip("Prometheus's pairwise sets not available (../shared/prometheus-data)")
    lines = enumerate(autoj.read_text().splitlines(), start=1)
    labels = {f"autoj-{n}": json.loads(line)["label"] for n, line in lines if line.strip()}
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=6)) as sim:
        judge = f"openai/sim-gpt@{sim.openai_base_url}"
        flask_eval("run", "--pairwise-set", str(autoj), "--judge", judge, "--limit", "80",
                   "--run", "aj", "--quiet", env=env)  # fmt: skip
        flask_eval("run", "--pairwise-set", str(hhh), "--judge", judge, "--limit", "30",
                   "--run", "hhh", "--quiet", env=env)  # fmt: skip
    for run in ("aj", "hhh"):
        st = json.loads(flask_eval("status", run, "--json", env=env).stdout)
        assert st["done"] == st["total"] > 0
    rows = [json.loads(x) for x in flask_eval("export", "aj", env=env).stdout.splitlines()]
    first, second = "response-1", "response-2"
    verdict: dict[str, dict[str, int]] = defaultdict(dict)
    for r in rows:
        winner = {VERDICT_FIRST: r["model"], VERDICT_SECOND: r["model_b"]}.get(r["score"], "tie")
        verdict[r["instance_id"]][r["model"]] = {first: 0, second: 1, "tie": 2}[winner]
    correct = correct_no_tie = n_no_tie = 0
    for instance, orders in verdict.items():
        a, b = orders[first], orders[second]
        combined = a if a == b else 2
        correct += combined == labels[instance]
        if labels[instance] != 2:
            n_no_tie += 1
            correct_no_tie += combined == labels[instance]
    doc = json.loads(flask_eval("report", "aj", "--format", "json", env=env).stdout)
    (acc,) = doc["pairwise"]["label_accuracy"]
    assert (acc["n"], acc["correct"]) == (len(verdict), correct) == (80, correct)
    assert (acc["n_no_tie"], acc["correct_no_tie"]) == (n_no_tie, correct_no_tie)
    assert acc["accuracy"] == pytest.approx(correct / 80)
    hhh_doc = json.loads(flask_eval("report", "hhh", "--format", "json", env=env).stdout)
    (hacc,) = hhh_doc["pairwise"]["label_accuracy"]
    assert hacc["n"] == 30 and hacc["n_no_tie"] == 30  # HHH has no ties: chosen is better


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        (["--pairwise", "baseline:nobody"], "nobody"),
        (["--pairwise", "sometimes"], "--pairwise"),
        (["--no-swap"], "--pairwise"),
    ],
)
def test_bad_pairwise_flags_are_one_line_exit_2_nothing_written(
    tmp_path: Path, extra: list[str], expect: str
) -> None:
    db = tmp_path / "ledger.db"
    proc = flask_eval("run", "--instances", str(EXAMPLES / "instances.jsonl"),
                      "--responses", f"a={EXAMPLES / 'model_a.jsonl'}",
                      "--responses", f"b={EXAMPLES / 'model_b.jsonl'}",
                      "--judge", "openai/gpt-4o", *extra, env=cli_env(f"sqlite:///{db}"),
                      check=False)  # fmt: skip
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and expect in lines[0], proc.stderr
    assert not db.exists()


def test_a_pair_without_shared_responses_and_a_malformed_set_are_refused(tmp_path: Path) -> None:
    only_a = tmp_path / "a.jsonl"
    only_a.write_text('{"question_id": 1, "text": "x"}\n')
    only_b = tmp_path / "b.jsonl"
    only_b.write_text('{"question_id": 2, "text": "y"}\n')
    bad_set = tmp_path / "autoj.json"
    bad_set.write_text('{"prompt": "q", "response 1": "a", "response 2": "b", "label": 1}\n'
                       '{"prompt": "q", "response 1": "a", "label": 7}\n')  # fmt: skip
    db = tmp_path / "ledger.db"
    env = cli_env(f"sqlite:///{db}")
    cases = [
        (["--instances", str(EXAMPLES / "instances.jsonl"), "--responses", f"a={only_a}",
          "--responses", f"b={only_b}", "--pairwise", "all"], "a-b"),
        (["--pairwise-set", str(bad_set)], f"{bad_set}:2"),
    ]  # fmt: skip
    for args, where in cases:
        proc = flask_eval("run", *args, "--judge", "openai/gpt-4o", env=env, check=False)
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and where in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr
    assert not db.exists()
