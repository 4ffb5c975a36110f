"""FastChat's own ``show_result.py`` (tests/upstream/fastchat, unmodified) run on our
export of a run of conversations gives the MT-Bench numbers of our report, to 1e-9:
single-answer grading (first turn, second turn, Average) and pairwise-all (win, loss,
tie, win_rate, loss_rate, win_rate_adjusted), with failed judgments (score -1 / "error"),
N/A and ties in the ledger, per judge."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flask_eval.app.exporting import fastchat_export
from flask_eval.app.report import build_report
from flask_eval.cli import main
from flask_eval.core.errors import InputError
from flask_eval.report.mtbench import ALL_TURNS
from flask_eval.report.render import write_jsonl
from flask_eval.storage.store import Store
from tests.report import conversations as conv

SHOW_RESULT = Path(__file__).resolve().parents[1] / "upstream" / "fastchat" / "show_result.py"
TOL = 1e-9
#: runs show_result.py as it is, printing pandas' floats at full precision
RUNNER = (
    "import runpy, sys, pandas as pd; "
    "pd.set_option('display.precision', 17); pd.set_option('display.width', 1000); "
    "pd.set_option('display.max_columns', 100); "
    "path = sys.argv[1]; sys.argv = [path, *sys.argv[2:]]; "
    "runpy.run_path(path, run_name='__main__')"
)


def show_result(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(SHOW_RESULT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def tables(out: str) -> dict[str, list[list[str]]]:
    """show_result's printed tables by title (``First turn``, ...; ``pairwise`` for the
    one table of a pairwise mode), each a list of rows split on whitespace."""
    found: dict[str, list[list[str]]] = {}
    title = "pairwise"
    for line in out.splitlines():
        heading = re.fullmatch(r"#+ (.+?) #+", line.strip())
        if heading:
            title = heading.group(1)
            continue
        if line.startswith(("Input file", "Mode")) or not line.strip():
            continue
        found.setdefault(title, []).append(line.split())
    return found


def export_file(store: Store, run_name: str, judge: str, path: Path) -> Path:
    info = store.find_run(run_name)
    assert info is not None
    with path.open("w", encoding="utf-8") as f:
        write_jsonl(f, fastchat_export(store, info, judge).rows)
    return path


def test_show_result_single_gives_the_reports_mt_bench_scores(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run = conv.create(store, "single", pairwise=False)
    judged = conv.finish(store, run, seed=3, pairwise=False)
    assert {j.status for j in judged} == {"done", "failed"}
    assert any(j.score is None and j.status == "done" for j in judged)  # N/A
    section = build_report(store, run, replicates=0, progress=False).mtbench
    assert section is not None
    checked = 0
    for judge in conv.JUDGES:
        path = export_file(store, "single", judge, tmp_path / f"{judge}_single.jsonl")
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert -1 in {r["score"] for r in lines}  # failed and N/A, as FastChat writes them
        assert any(r["score"] % 1 == 0.5 for r in lines)  # ratings written with a fraction
        assert {r["judge"][0] for r in lines} == {judge}
        printed = tables(show_result("--mode", "single", "--input-file", str(path)))
        theirs = {
            "First turn": {r[0]: float(r[2]) for r in printed["First turn"] if len(r) == 3},
            "Second turn": {r[0]: float(r[2]) for r in printed["Second turn"] if len(r) == 3},
            "Average": {r[0]: float(r[1]) for r in printed["Average"] if len(r) == 2},
        }
        ours = {s.model: s for s in section.single if s.judge == judge}
        assert set(theirs["Average"]) == set(ours) == set(conv.MODELS)
        for model, score in ours.items():
            assert score.turn_mean(1) == pytest.approx(theirs["First turn"][model], abs=TOL)
            assert score.turn_mean(2) == pytest.approx(theirs["Second turn"][model], abs=TOL)
            assert score.average == pytest.approx(theirs["Average"][model], abs=TOL)
            checked += 1
    assert checked == len(conv.MODELS) * len(conv.JUDGES)
    store.close()


def test_show_result_pairwise_all_gives_the_reports_mt_bench_win_rates(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    run = conv.create(store, "pair", pairwise=True)
    judged = conv.finish(store, run, seed=5, pairwise=True)
    assert {j.score for j in judged if j.status == "done"} == {1, 2, 3}  # ties among them
    section = build_report(store, run, replicates=0, progress=False).mtbench
    assert section is not None and section.notes  # matches with an order failed
    for judge in conv.JUDGES:
        path = export_file(store, "pair", judge, tmp_path / f"{judge}_pair.jsonl")
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        winners = {r[k] for r in lines for k in ("g1_winner", "g2_winner")}
        assert winners == {"model_1", "model_2", "tie", "error"}
        printed = tables(show_result("--mode", "pairwise-all", "--input-file", str(path)))
        rows = {r[0]: r[1:] for r in printed["pairwise"] if len(r) == 7}
        ours = {p.model: p for p in section.pairwise if p.judge == judge and p.turn == ALL_TURNS}
        assert set(rows) == set(ours) == set(conv.MODELS)
        for model, p in ours.items():
            win, loss, tie, win_rate, loss_rate, adjusted = rows[model]
            assert (p.win, p.loss, p.tie) == (int(win), int(loss), int(tie))
            assert p.win_rate == pytest.approx(float(win_rate), abs=TOL)
            assert p.loss_rate == pytest.approx(float(loss_rate), abs=TOL)
            assert p.win_rate_adjusted == pytest.approx(float(adjusted), abs=TOL)
    store.close()


def test_export_writes_question_ids_turns_and_fields_as_fastchat(tmp_path: Path) -> None:
    """Integer ids come back as integers ("007" and "h1" stay text); each record has
    FastChat's fields in its order; one record per match in a pairwise run."""
    store = Store(f"sqlite:///{tmp_path / 'f.db'}")
    single = conv.create(store, "single", pairwise=False)
    conv.finish(store, single, seed=1, pairwise=False)
    pair = conv.create(store, "pair", pairwise=True)
    conv.finish(store, pair, seed=2, pairwise=True)
    records = list(fastchat_export(store, single, conv.JUDGES[0]).rows)
    assert list(records[0]) == [
        "question_id",
        "model",
        "judge",
        "user_prompt",
        "judgment",
        "score",
        "turn",
        "tstamp",
    ]
    assert {r["question_id"] for r in records} == {81, 82, 111, 112, 121, 131, "007", "h1"}
    assert {r["turn"] for r in records} == {1, 2}
    assert records[0]["judge"] == [conv.JUDGES[0], conv.CRITERION]
    matches = list(fastchat_export(store, pair, conv.JUDGES[1]).rows)
    assert list(matches[0])[:5] == ["question_id", "model_1", "model_2", "g1_winner", "g2_winner"]
    keys = [(m["question_id"], m["turn"], m["model_1"], m["model_2"]) for m in matches]
    assert len(keys) == len(set(keys))
    rank = {m: k for k, m in enumerate(conv.MODELS)}
    assert all(rank[m["model_1"]] < rank[m["model_2"]] for m in matches)
    with pytest.raises(InputError, match="name one with --judge"):
        fastchat_export(store, single)
    with pytest.raises(InputError, match="not a judge of run single"):
        fastchat_export(store, single, "nobody")
    store.close()


def test_the_export_command_writes_fastchat_lines(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = Store(f"sqlite:///{db}")
    run = conv.create(store, "single", pairwise=False)
    conv.finish(store, run, seed=4, pairwise=False)
    store.close()
    env = {"FLASK_EVAL_DATABASE_URL": f"sqlite:///{db}", "FLASK_EVAL_BROKER_URL": ""}
    runner = CliRunner()
    args = ["export", "single", "--format", "fastchat", "--judge", conv.JUDGES[0]]
    result = runner.invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines and all(r["judge"][0] == conv.JUDGES[0] for r in lines)
    refused = runner.invoke(main, ["export", "single", "--format", "fastchat"], env=env)
    assert refused.exit_code == 2 and "--judge" in refused.output
    misplaced = runner.invoke(main, ["export", "single", "--judge", "x"], env=env)
    assert misplaced.exit_code == 2 and "--format fastchat" in misplaced.output
