"""BiGGen Bench's dimensions (pure): per-capability and per-task cells, and the overall
that is the mean of the capability means, checked against loops written independently of
the aggregation core, point estimates and bootstrap replicates alike."""

from __future__ import annotations

import html
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from flask_eval.app.report import build_report
from flask_eval.core.errors import InputError
from flask_eval.producer.sources import Sources, load_sources
from flask_eval.report.bootstrap import instance_weights, percentile_interval
from flask_eval.report.breakdown import Aggregation, flask_breakdown, report_breakdown
from flask_eval.report.document import Report, definitions, with_intervals
from flask_eval.report.html import render as html_page
from flask_eval.report.intervals import cell_intervals
from flask_eval.report.metrics import (
    BIGGEN_KEY,
    BIGGEN_RULE,
    CAPABILITY,
    OVERALL,
    OVERALL_KEY,
    SKILL,
    TASK,
)
from flask_eval.report.render import rows_csv, run_summary, to_json, to_table
from flask_eval.report.scores import FAILED, NA, NONE, SCORED, InstanceGroups, ScoreTable, build
from flask_eval.report.svg import capability_heatmap, radar
from flask_eval.storage.store import Store
from tests.report.ledger import Outcome, Row, finish, planned_run

TOL = 1e-9
CAPABILITIES = tuple(f"cap{k}" for k in range(9))
MODELS, JUDGES = ("m1", "m2"), ("j1", "j2")


@dataclass(frozen=True)
class Judged:
    model: str
    judge: str
    instance: str
    state: int
    score: float


def dataset(seed: int, n: int = 120) -> tuple[ScoreTable, list[Judged], dict[str, str]]:
    """``n`` instances of unequal capabilities (cap0 has many, cap8 few), each judged on
    its own rubric, all named "rubric"; some N/A, failed or missing judgments."""
    rng = random.Random(seed)
    cap_of = {f"{i:03d}": CAPABILITIES[min(int(rng.expovariate(0.4)), 8)] for i in range(n)}
    cap_of.update({f"{i:03d}": c for i, c in enumerate(CAPABILITIES)})  # each one present
    task_of = {iid: f"{cap}_task{int(iid) % 3}" for iid, cap in cap_of.items()}
    judged, cells = [], []
    states, scores = [], []
    for iid, cap in cap_of.items():
        bias = CAPABILITIES.index(cap) / 4  # capabilities differ, so the two overalls do
        for model in MODELS:
            cells.append((model, iid, "rubric"))
            row_states, row_scores = [], []
            for judge in JUDGES:
                u = rng.random()
                state = SCORED if u < 0.85 else NA if u < 0.9 else FAILED if u < 0.95 else NONE
                score = (
                    float(min(5, max(1, round(rng.gauss(2 + bias, 1)))))
                    if state == SCORED
                    else np.nan
                )
                row_states.append(state)
                row_scores.append(score)
                if state != NONE:
                    judged.append(Judged(model, judge, iid, state, score))
            states.append(row_states)
            scores.append(row_scores)
    table = build(
        cells,
        JUDGES,
        np.array(states, dtype=np.int8),
        np.array(scores),
        InstanceGroups(capability_of=cap_of, task_of=task_of),
    )
    return table, judged, cap_of


def aggregation(table: ScoreTable) -> Aggregation:
    return Aggregation(
        table, report_breakdown({}, capabilities=True, tasks=True, partial_abilities=True)
    )


def naive_means(judged: list[Judged], group: dict[str, str]) -> dict[tuple[str, str, str], float]:
    """(model, judge, group) -> mean of the scored judgments, by plain loops."""
    sums: dict[tuple[str, str, str], list[float]] = {}
    for j in judged:
        if j.state == SCORED:
            sums.setdefault((j.model, j.judge, group[j.instance]), []).append(j.score)
    return {k: sum(v) / len(v) for k, v in sums.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_overall_biggen_is_the_mean_of_the_capability_means(seed: int) -> None:
    table, judged, cap_of = dataset(seed)
    rows = {(r.model, r.judge, r.dimension, r.key): r for r in aggregation(table).rows()}
    caps = naive_means(judged, cap_of)
    task_of = {iid: f"{cap}_task{int(iid) % 3}" for iid, cap in cap_of.items()}
    tasks = naive_means(judged, task_of)
    pooled = naive_means(judged, dict.fromkeys(cap_of, "all"))
    for (m, j, cap), mean in caps.items():
        assert rows[(m, j, CAPABILITY, cap)].mean == pytest.approx(mean, abs=TOL)
    for (m, j, task), mean in tasks.items():
        assert rows[(m, j, TASK, task)].mean == pytest.approx(mean, abs=TOL)
    for m in MODELS:
        for j in JUDGES:
            of_caps = [caps[(m, j, c)] for c in CAPABILITIES if (m, j, c) in caps]
            biggen = rows[(m, j, OVERALL, BIGGEN_KEY)]
            assert biggen.mean == pytest.approx(sum(of_caps) / len(of_caps), abs=TOL)
            flask = rows[(m, j, OVERALL, OVERALL_KEY)]
            assert flask.mean == pytest.approx(pooled[(m, j, "all")], abs=TOL)
            assert biggen.mean is not None and flask.mean is not None
            assert abs(biggen.mean - flask.mean) > 1e-3  # unequal capabilities: not the same
            mine = [x for x in judged if (x.model, x.judge) == (m, j)]
            assert (biggen.n, biggen.n_na, biggen.n_failed) == (
                sum(x.state == SCORED for x in mine),
                sum(x.state == NA for x in mine),
                sum(x.state == FAILED for x in mine),
            )


def test_one_rubric_name_shared_by_every_instance_is_one_criterion() -> None:
    table, _, _ = dataset(0, n=765)
    rows = aggregation(table).rows()
    assert len(table.instances) == 765
    assert {r.key for r in rows if r.dimension == SKILL} == {"rubric"}
    assert len([r for r in rows if r.dimension == SKILL]) == len(MODELS) * len(JUDGES)
    assert not [r for r in rows if r.dimension == "ability"]  # an own rubric has no ability
    assert {r.key for r in rows if r.dimension == CAPABILITY} == set(CAPABILITIES)


def naive_biggen_interval(
    table: ScoreTable, weights: np.ndarray, model: str, judge: str
) -> tuple[float, float]:
    """Per replicate: each capability's weighted mean, then their mean; percentiles."""
    m, j = table.models.index(model), table.judges.index(judge)
    reps = []
    for b in range(weights.shape[1]):
        means = []
        for c in range(len(table.capabilities)):
            total = count = 0.0
            for cell in range(table.n_cells):
                inst = table.instance[cell]
                if table.model[cell] != m or table.capability[inst] != c:
                    continue
                if table.state[cell, j] == SCORED:
                    total += weights[inst, b] * table.score[cell, j]
                    count += weights[inst, b]
            if count > 0:
                means.append(total / count)
        reps.append(sum(means) / len(means) if means else np.nan)
    lo, hi = percentile_interval(np.array(reps)[None, :])
    return float(lo[0]), float(hi[0])


def test_intervals_are_the_naive_replicates_and_reproducible_from_the_seed() -> None:
    table, _, _ = dataset(3, n=60)
    agg = aggregation(table)
    weights = instance_weights(len(table.instances), 200, seed=11)
    got = cell_intervals(agg, weights)
    again = cell_intervals(aggregation(table), instance_weights(len(table.instances), 200, 11))
    other = cell_intervals(agg, instance_weights(len(table.instances), 200, seed=12))
    assert got == again
    assert got != other
    for m in MODELS:
        for j in JUDGES:
            lo, hi = got[(m, j, OVERALL, BIGGEN_KEY)]
            assert (lo, hi) == pytest.approx(naive_biggen_interval(table, weights, m, j), abs=TOL)
    assert {k[2] for k in got} >= {OVERALL, SKILL, CAPABILITY, TASK}


def test_without_capabilities_the_report_has_flask_dimensions_only() -> None:
    table, _, _ = dataset(0, n=20)
    plain = build([("m", "1", "s")], ["j"], np.array([[SCORED]], dtype=np.int8), np.array([[3.0]]))
    assert plain.capabilities == () and list(plain.capability) == [-1]
    dims = {r.dimension for r in Aggregation(plain, flask_breakdown({"s": "A"})).rows()}
    assert dims == {"overall", "skill", "ability"}  # no difficulty, domain or capability
    assert definitions(plain) == [] and definitions(table)[0]["definition"] == BIGGEN_RULE
    with pytest.raises(ValueError, match="no ability known"):
        Aggregation(table, flask_breakdown({}))  # strict unless asked


def report_of(table: ScoreTable, replicates: int = 50) -> Report:
    agg = aggregation(table)
    intervals = cell_intervals(agg, instance_weights(len(table.instances), replicates, 0))
    return Report(
        run="biggen",
        rows=with_intervals(agg.rows(), intervals),
        models=list(table.models),
        judges=list(table.judges),
        skills=["rubric"],
        capabilities=list(table.capabilities),
        tasks=list(table.tasks),
        definitions=definitions(table),
        bootstrap={"replicates": replicates, "seed": 0, "confidence": 0.95},
    )


def test_every_format_carries_the_new_rows_and_says_what_biggens_overall_is() -> None:
    table, _, _ = dataset(4, n=60)
    report = report_of(table)
    data = json.loads(to_json(report))
    dims = {(r["dimension"], r["key"]) for r in data["rows"]}
    assert {(OVERALL, OVERALL_KEY), (OVERALL, BIGGEN_KEY)} <= dims
    assert {d for d, _ in dims} >= {CAPABILITY, TASK, SKILL}
    assert data["definitions"] == [
        {
            "dimension": OVERALL,
            "key": BIGGEN_KEY,
            "label": "overall (BiGGen)",
            "definition": BIGGEN_RULE,
        }
    ]
    biggen = [r for r in data["rows"] if r["key"] == BIGGEN_KEY]
    assert len(biggen) == 4 and all(r["ci_low"] <= r["mean"] <= r["ci_high"] for r in biggen)
    text = to_table(report)
    assert BIGGEN_RULE in text and "overall (BiGGen)" in text
    assert "Capabilities" in text and "Tasks" in text
    csv = rows_csv(report.rows)
    assert ",overall,biggen," in csv and ",capability,cap0," in csv
    page = html_page(report, [])
    assert html.escape(BIGGEN_RULE) in page and 'id="capabilities"' in page and 'id="tasks"' in page
    assert page.count("<h3>overall (BiGGen)</h3>") == 1


def _keys(figure: str) -> list[str]:
    """The keys of a figure's marks, in the order drawn."""
    return list(dict.fromkeys(re.findall(r'data-key="([^"]*)"', figure)))


def test_the_radar_shows_the_capabilities_not_the_instances() -> None:
    table, _, _ = dataset(5, n=765)
    report = report_of(table, replicates=0)
    assert _keys(radar(report, "j1")) == list(CAPABILITIES)  # the spokes, clockwise
    assert _keys(capability_heatmap(report, "j1")) == list(CAPABILITIES)  # the rows
    # criteria named per instance: a note, never one spoke per instance rubric
    cells = [("m", f"{i:02d}", f"rubric-{i}") for i in range(30)]
    each = build(cells, ["j"], np.full((30, 1), SCORED, dtype=np.int8), np.full((30, 1), 3.0))
    rows = Aggregation(each, report_breakdown({}, partial_abilities=True)).rows()
    assert len({r.key for r in rows if r.dimension == SKILL}) == 30
    fig = radar(Report(run="x", rows=with_intervals(rows, {}), models=["m"], judges=["j"]), "j")
    assert "too many skills (30) for a radar chart" in fig and "rubric-" not in fig


# -- BiGGen's pipeline, through a ledger -------------------------------------------------------


def _biggen(tmp_path: Path) -> Path:
    records = {}
    for capability, task in (
        ("planning", "travel_plan"),
        ("refinement", "essay_revision"),
        ("refinement", "llm_judge_absolute"),
        ("grounding", "role_playing"),
    ):
        for k in range(2):
            key = f"{capability}_{task}_{k}"
            records[key] = {
                "id": key,
                "capability": capability,
                "task": task,
                "instance_idx": k,
                "input": f"{task} {k}",
                "reference_answer": "r",
                "system_prompt": "",
                "score_rubric": {
                    "criteria": "c?",
                    **{f"score{n}_description": f"l{n}" for n in range(1, 6)},
                },
                "response": "x",
                "response_model_name": "m",
            }
    path = tmp_path / "biggen.json"
    path.write_text(json.dumps(records))
    return path


def test_biggen_runs_follow_biggens_pipeline_and_say_so(tmp_path: Path) -> None:
    """By default the llm_judge instances are not in the run, and the notes say why; kept
    (--biggen-llm-judge), the notes say per judge how that differs from BiGGen's; the run
    summary and the leaderboard lead with BiGGen's overall; tasks sit under capabilities."""
    judges_file = tmp_path / "judges.yaml"
    judges_file.write_text(
        "- spec: openai/p\n  name: prom\n  protocol: prometheus\n- spec: openai/g\n  name: gpt\n"
    )
    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    scores = {"planning": 5, "refinement": 1, "grounding": 3}

    def score(row: Row) -> Outcome:
        capability = row.instance_id.split("_")[0]
        return "done", 5 if "llm_judge" in row.instance_id else scores[capability]

    reports = {}
    for name, keep in (("plain", False), ("kept", True)):
        run = planned_run(
            store,
            name,
            instances=None,
            responses=(),
            biggen=str(_biggen(tmp_path)),
            judges_files=[str(judges_file)],
            biggen_llm_judge=keep,
        )
        finish(store, run, score)
        reports[name] = build_report(store, run, replicates=0, progress=False)
    plain, kept = reports["plain"], reports["kept"]
    assert "llm_judge_absolute" not in plain.tasks and "llm_judge_absolute" in kept.tasks
    (note,) = plain.notes
    assert "skips them for Prometheus evaluators" in note and "--biggen-llm-judge" in note
    assert [n.split(" ")[1] for n in kept.notes] == ["prom", "gpt"]
    assert "prometheus protocol" in kept.notes[0] and "unlike BiGGen's" in kept.notes[0]
    # BiGGen's overall: the mean of capability means (5 + 1 + 3) / 3, not the pooled mean
    overall = {(r.judge, r.key): r.mean for r in plain.rows if r.dimension == "overall"}
    assert overall[("prom", "biggen")] == pytest.approx(3.0)
    assert overall[("prom", "all")] == pytest.approx((5 * 2 + 1 * 2 + 3 * 2) / 6)
    summary = run_summary(plain, {})
    assert "overall (BiGGen: mean of capability means)" in summary and " 3.00 " in summary
    text = to_table(plain)
    assert text.index("grounding:") < text.index("role_playing") < text.index("planning:")
    assert text.index("planning:") < text.index("travel_plan") < text.index("refinement:")
    assert kept.tasks == ["role_playing", "travel_plan", "essay_revision", "llm_judge_absolute"]
    store.close()


def test_the_biggen_flag_goes_with_biggen() -> None:
    with pytest.raises(InputError, match="--biggen-llm-judge goes with --biggen"):
        load_sources(Sources(instances="i.jsonl", biggen_llm_judge=True))
