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

from flask_eval.app.report import build_report
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.report.render import to_json, to_table
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
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
from tests.report.ledger import Outcome, Row, finish, planned_run
from tests.report.ledger import judges as ledger_judges

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


@pytest.mark.e2e
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
        dry = flask_eval(
            "run",
            "--instances",
            str(instances),
            *responses,
            "--judges",
            str(judges),
            "--pairwise",
            "all",
            "--dry-run",
            env=env,
        ).stdout
        assert "N^2" in dry
        flask_eval(
            "run",
            "--instances",
            str(instances),
            *responses,
            "--judges",
            str(judges),
            "--pairwise",
            "all",
            "--run",
            "pw",
            "--quiet",
            env=env,
        )
    st = json.loads(flask_eval("status", "pw", "--json", env=env).stdout)
    assert st["done"] == st["total"] == 60 * 12 * 2  # 6 pairs x 2 orders x 2 judges
    rows = [json.loads(x) for x in flask_eval("export", "pw", env=env).stdout.splitlines()]
    assert {r["score"] for r in rows} <= {VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE}
    assert consistency(rows, "prom") == pytest.approx(0.8, abs=0.07)
    doc = json.loads(flask_eval("report", "pw", "--format", "json", env=env).stdout)
    dims = {r["dimension"] for r in doc["rows"]}
    assert {"pairwise", "rating", "position"} <= dims
    position = {
        r["key"]: r for r in doc["rows"] if r["dimension"] == "position" and r["criterion"] == "all"
    }
    assert position["prom"]["mean"] == pytest.approx(consistency(rows, "prom"), abs=1e-9)
    assert position["ours"]["mean"] == pytest.approx(consistency(rows, "ours"), abs=1e-9)
    ratings = [
        r
        for r in doc["rows"]
        if r["dimension"] == "rating" and r["judge"] == "prom" and r["criterion"] == "all"
    ]
    assert {r["key"] for r in ratings} == set(MODELS)
    assert next(r for r in ratings if r["key"] == doc["pairwise"]["anchor"])["mean"] == 1000
    table = flask_eval("report", "pw", env=env).stdout
    assert "Leaderboard | judge prom" in table and "Win-rate matrix" in table
    assert "Position bias" in table
    lines = list(
        csv.DictReader(io.StringIO(flask_eval("report", "pw", "--format", "csv", env=env).stdout))
    )
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
    responses = [
        "--responses",
        f"a={EXAMPLES / 'model_a.jsonl'}",
        "--responses",
        f"b={EXAMPLES / 'model_b.jsonl'}",
    ]
    env = cli_env(
        sqlite_url, amqp_url, FLASK_EVAL_LEASE_SECONDS="4", FLASK_EVAL_VISIBILITY_TIMEOUT="12"
    )
    with running_simulator(SimConfig(latency_ms=300, latency_dist="lognormal", seed=8)) as sim:
        judges = judges_yaml(tmp_path, sim)
        flask_eval(
            "run",
            "--instances",
            str(instances),
            *responses,
            "--judges",
            str(judges),
            "--pairwise",
            "all",
            "--per-criterion",
            "--limit",
            "12",
            "--run",
            "k9",
            "--quiet",
            "--no-wait",
            env=env,
        )
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


AUTOJ_UTILS = PAIRWISE_DATA.parent / "autoj_utils"
#: Auto-J's outputs (0: the response shown first is better, 1: the second, 2: a tie)
AS_VERDICT = {0: VERDICT_FIRST, 1: VERDICT_SECOND, 2: VERDICT_TIE}


def _outputs(path: Path) -> list[int]:
    return [int(json.loads(line)["output"]) for line in path.read_text().splitlines()]


@pytest.mark.e2e
def test_auto_j_accuracy_is_auto_j_s_own_on_its_example_predictions(tmp_path: Path) -> None:
    """Auto-J-13B's example predictions (both orders) written into a run of Auto-J's set:
    the report gives what Auto-J's ``pairwise_eval.py`` gives on the same two files, its
    published 54.96 (right in both orders), 59.99 (one order) and consistency 83.41."""
    autoj = PAIRWISE_DATA / "autoj_pairwise.json"
    listed = AUTOJ_UTILS / "pairwise_example_output.jsonl"
    exchanged = AUTOJ_UTILS / "pairwise_exchange_example_output.jsonl"
    if not (autoj.exists() and listed.exists() and exchanged.exists()):
        pytest.skip("Auto-J's example predictions not available (../shared/prometheus-data)")
    first, second = _outputs(listed), _outputs(exchanged)
    store = Store(f"sqlite:///{tmp_path / 'aj.db'}")
    run = planned_run(
        store,
        "aj",
        instances=None,
        responses=(),
        pairwise_set=str(autoj),
        judges=ledger_judges("autoj-13b"),
    )

    def verdict(row: Row) -> Outcome:
        line = int(row.instance_id.removeprefix("autoj-")) - 1
        # response 1 shown first: the listed order; response 2 first: the exchanged one
        return "done", AS_VERDICT[(first if row.model == "response-1" else second)[line]]

    finish(store, run, verdict)
    report = build_report(store, run, replicates=0, progress=False)
    assert report.pairwise is not None
    acc = next(a for a in report.pairwise.label_accuracy if a.group == "all")
    assert (acc.both.n, acc.both.correct, acc.listed.n, acc.listed.correct) == (
        1392,
        765,
        1392,
        835,
    )
    assert acc.both.accuracy is not None and acc.listed.accuracy is not None
    assert (round(100 * acc.both.accuracy, 2), round(100 * acc.listed.accuracy, 2)) == (
        54.96,
        59.99,
    )
    (position,) = report.pairwise.positions
    assert position.consistency is not None and round(100 * position.consistency, 2) == 83.41
    text = to_table(report)
    assert "0.550 (765/1392)" in text and "0.600 (835/1392)" in text
    assert "resampling 1392 instances" not in text  # no bootstrap asked
    store.close()


def test_hhh_accuracy_per_source_beside_the_pooled_value(tmp_path: Path) -> None:
    """HHH Alignment judged in both orders: accuracy per source (helpful, harmless,
    honest, other) and pooled, counted by hand from the verdicts written."""
    hhh = PAIRWISE_DATA / "hhh_alignment_eval.json"
    if not hhh.exists():
        pytest.skip("Prometheus's pairwise sets not available (../shared/prometheus-data)")
    sources = [r["source"] for r in json.loads(hhh.read_text())]
    store = Store(f"sqlite:///{tmp_path / 'hhh.db'}")
    run = planned_run(
        store,
        "hhh",
        instances=None,
        responses=(),
        pairwise_set=str(hhh),
        judges=ledger_judges("judge"),
    )

    def verdict(row: Row) -> Outcome:
        n = int(row.instance_id.removeprefix("hhh-"))
        if row.model == "chosen":  # the listed order: right on 2 records of 3
            return "done", VERDICT_SECOND if n % 3 == 0 else VERDICT_FIRST
        return "done", VERDICT_FIRST if n % 5 == 0 else VERDICT_SECOND  # right on 4 of 5

    finish(store, run, verdict)
    report = build_report(store, run, replicates=0, progress=False)
    assert report.pairwise is not None
    found = {a.group: a for a in report.pairwise.label_accuracy}
    assert list(found) == ["all", "harmless", "helpful", "honest", "other"]
    for group in found:
        numbers = [n for n, s in enumerate(sources, 1) if group in ("all", s)]
        listed = sum(n % 3 != 0 for n in numbers)
        both = sum(n % 3 != 0 and n % 5 != 0 for n in numbers)
        acc = found[group]
        assert (acc.both.n, acc.both.correct) == (len(numbers), both)
        assert (acc.listed.n, acc.listed.correct) == (len(numbers), listed)
    doc = json.loads(to_json(report))
    assert [a["group"] for a in doc["pairwise"]["label_accuracy"]][1:] == [
        "harmless",
        "helpful",
        "honest",
        "other",
    ]
    text = to_table(report)
    assert "  harmless" in text and "  helpful" in text and "  without tie labels" in text
    store.close()


def test_a_failed_order_sets_its_comparison_apart(tmp_path: Path) -> None:
    """A run planned in both orders whose reverse order failed on one instance: that
    comparison is out of the win rates and ratings, counted apart, said in the notes."""
    store = Store(f"sqlite:///{tmp_path / 'half.db'}")
    run = planned_run(
        store,
        "half",
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=[f"a={EXAMPLES / 'model_a.jsonl'}", f"b={EXAMPLES / 'model_b.jsonl'}"],
        judges=ledger_judges("j"),
        pairwise="all",
        limit=6,
    )

    def verdict(row: Row) -> Outcome:
        if row.instance_id == "1" and row.model == "b":
            return "failed", None
        return "done", VERDICT_FIRST if row.model == "a" else VERDICT_SECOND  # a, always

    finish(store, run, verdict)
    pw = build_report(store, run, replicates=0, progress=False).pairwise
    assert pw is not None
    (wr,) = pw.win_rates
    assert (wr.n, wr.n_swapped, wr.win) == (5, 5, 1.0)
    (single,) = pw.one_order
    assert single.n == 1 and any("judged in one order only" in n for n in pw.notes)
    store.close()


@pytest.mark.e2e
def test_one_anchor_in_run_and_report_and_the_instances_resampled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Models given as b then a: `run` and `report` both anchor the ratings at b (the
    stored config is sorted; the order given is kept with it), and the text report says
    how many instances the pairwise intervals resample."""
    from click.testing import CliRunner

    from flask_eval.cli import main

    env = {
        "FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp_path / 'anchor.db'}",
        "OPENAI_API_KEY": "sk-test-key",
        "FLASK_EVAL_BROKER_URL": None,
    }
    with running_simulator(SimConfig(seed=2)) as sim:
        ran = CliRunner().invoke(
            main,
            [
                "run",
                "--instances",
                str(EXAMPLES / "instances.jsonl"),
                "--responses",
                f"model_b={EXAMPLES / 'model_b.jsonl'}",
                "--responses",
                f"model_a={EXAMPLES / 'model_a.jsonl'}",
                "--judge",
                f"openai/sim@{sim.openai_base_url}",
                "--pairwise",
                "all",
                "--limit",
                "4",
                "--run",
                "anchored",
                "--quiet",
            ],
            env=env,
        )
    assert ran.exit_code == 0, ran.output
    assert "anchor model_b at 1000" in ran.stdout
    report = CliRunner().invoke(
        main, ["report", "anchored", "--format", "json", "--quiet"], env=env
    )
    doc = json.loads(report.stdout)
    assert doc["pairwise"]["anchor"] == "model_b" and doc["pairwise"]["instances"] == 4
    rating = {r["key"]: r["mean"] for r in doc["rows"] if r["dimension"] == "rating"}
    assert rating["model_b"] == 1000
    text = CliRunner().invoke(main, ["report", "anchored", "--quiet"], env=env).stdout
    assert "anchor model_b (rating 1000)" in text
    assert "resampling 4 instances" in text and "resampling 0 instances" not in text


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
    proc = flask_eval(
        "run",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--responses",
        f"a={EXAMPLES / 'model_a.jsonl'}",
        "--responses",
        f"b={EXAMPLES / 'model_b.jsonl'}",
        "--judge",
        "openai/gpt-5.4",
        *extra,
        env=cli_env(f"sqlite:///{db}"),
        check=False,
    )
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and expect in lines[0], proc.stderr
    assert not db.exists()


def test_a_pair_without_shared_responses_and_a_malformed_set_are_refused(tmp_path: Path) -> None:
    only_a = tmp_path / "a.jsonl"
    only_a.write_text('{"question_id": 1, "text": "x"}\n')
    only_b = tmp_path / "b.jsonl"
    only_b.write_text('{"question_id": 2, "text": "y"}\n')
    bad_set = tmp_path / "autoj.json"
    bad_set.write_text(
        '{"prompt": "q", "response 1": "a", "response 2": "b", "label": 1}\n'
        '{"prompt": "q", "response 1": "a", "label": 7}\n'
    )
    db = tmp_path / "ledger.db"
    env = cli_env(f"sqlite:///{db}")
    cases = [
        (
            [
                "--instances",
                str(EXAMPLES / "instances.jsonl"),
                "--responses",
                f"a={only_a}",
                "--responses",
                f"b={only_b}",
                "--pairwise",
                "all",
            ],
            "a-b",
        ),
        (["--pairwise-set", str(bad_set)], f"{bad_set}:2"),
    ]
    for args, where in cases:
        proc = flask_eval("run", *args, "--judge", "openai/gpt-5.4", env=env, check=False)
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and where in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr
    assert not db.exists()


def pairwise_run_of_the_examples(tmp_path: Path, seed: int) -> dict[str, str | None]:
    """An in-process all-pairs run named ``lc`` of the shipped examples (model_a and
    model_b) against the simulator; the environment that reaches its store."""
    from click.testing import CliRunner

    from flask_eval.cli import main

    env = {
        "FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp_path / 'lc.db'}",
        "OPENAI_API_KEY": "sk-test-key",
        "FLASK_EVAL_BROKER_URL": None,
    }
    with running_simulator(SimConfig(seed=seed)) as sim:
        ran = CliRunner().invoke(
            main,
            [
                "run",
                "--instances",
                str(EXAMPLES / "instances.jsonl"),
                "--responses",
                f"model_a={EXAMPLES / 'model_a.jsonl'}",
                "--responses",
                f"model_b={EXAMPLES / 'model_b.jsonl'}",
                "--judge",
                f"openai/sim@{sim.openai_base_url}",
                "--pairwise",
                "all",
                "--run",
                "lc",
                "--quiet",
            ],
            env=env,
        )
    assert ran.exit_code == 0, ran.output
    return env


@pytest.mark.e2e
def test_the_leaderboard_shows_length_and_style_controlled_figures(tmp_path: Path) -> None:
    """An in-process pairwise run against the simulator: the JSON report has, per model,
    a length-controlled win rate (the anchor at 0.5) and a style-controlled rating (the
    anchor at 1000, an interval for the others), and the text report a section for them
    with a note saying what each controls for."""
    from click.testing import CliRunner

    from flask_eval.cli import main

    env = pairwise_run_of_the_examples(tmp_path, seed=4)
    report = CliRunner().invoke(main, ["report", "lc", "--format", "json", "--quiet"], env=env)
    doc = json.loads(report.stdout)
    lc = {r["key"]: r for r in doc["rows"] if r["dimension"] == "length_controlled"}
    sc = {r["key"]: r for r in doc["rows"] if r["dimension"] == "style_controlled"}
    assert set(lc) == set(sc) == {"model_a", "model_b"}
    assert lc["model_a"]["mean"] == 0.5 and sc["model_a"]["mean"] == 1000
    assert lc["model_b"]["n"] > 0 and 0 <= lc["model_b"]["win_rate"] <= 1
    assert sc["model_b"]["ci_low"] is not None and sc["model_b"]["win_rate"] is not None
    assert any("length-controlled win rate (AlpacaEval 2)" in n for n in doc["pairwise"]["notes"])
    text = CliRunner().invoke(main, ["report", "lc", "--quiet"], env=env).stdout
    assert "Controlled for length and style | judge" in text
    assert "LC win" in text and "style rating" in text
