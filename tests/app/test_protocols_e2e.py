"""Instance rubrics, custom criteria and evaluator-LM protocols end to end: the CLI, the
judge simulator behind the real SDKs, the in-process executor and the ledger (SQLite and
PostgreSQL)."""

from __future__ import annotations

import json
import os
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from scipy import stats as scipy_stats

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES, REPO
from tests.helpers import cli_env, flask_eval

PROMETHEUS_DATA = Path(
    os.environ.get("FLASK_EVAL_PROMETHEUS_DATA", REPO.parent / "shared" / "prometheus-data")
)
BIGGEN = PROMETHEUS_DATA / "BiGGen-Bench" / "sample_responses.json"
MT_BENCH = PROMETHEUS_DATA / "eval" / "benchmark" / "data" / "mt_bench_eval.json"
VICUNA = PROMETHEUS_DATA / "eval" / "benchmark" / "data" / "vicuna_eval.json"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path.name} not available (../shared/prometheus-data)")
    return path


def judges_file(tmp_path: Path, entries: list[dict[str, Any]]) -> Path:
    lines = []
    for entry in entries:
        lines.append(f"- spec: {entry['spec']}")
        lines += [f"  {k}: {v}" for k, v in entry.items() if k != "spec"]
    path = tmp_path / "judges.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def export(env: dict[str, str], run: str) -> list[dict[str, Any]]:
    out = flask_eval("export", run, env=env).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def report_rows(env: dict[str, str], run: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(
        flask_eval("report", run, "--format", "json", env=env).stdout
    )["rows"]
    return rows


@pytest.mark.e2e
def test_biggen_bench_all_instances_two_protocols_capabilities_and_overall(
    tmp_path: Path, sqlite_url: str
) -> None:
    """BiGGen's 747 instances (its 18 llm_judge ones are left out, as BiGGen's pipeline
    leaves them out for Prometheus evaluators), one judge in Prometheus 2's format (OpenAI
    SDK) and one in ours (Anthropic SDK): every judgment done; 9 capabilities and 75 tasks
    per model x judge; the overall equals BiGGen's rule (the mean of capability means)
    recomputed here from the per-judgment export."""
    data = {k: v for k, v in json.loads(need(BIGGEN).read_text()).items() if "llm_judge" not in k}
    capabilities = {r["capability"] for r in data.values()}
    tasks = {(r["capability"], r["task"]) for r in data.values()}
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=5)) as sim:
        judges = judges_file(
            tmp_path,
            [
                {
                    "spec": f"openai/prometheus-7b@{sim.openai_base_url}",
                    "name": "prom",
                    "protocol": "prometheus",
                },
                {"spec": f"anthropic/sim-claude@{sim.anthropic_base_url}", "name": "ours"},
            ],
        )
        flask_eval(
            "run",
            "--biggen",
            str(BIGGEN),
            "--judges",
            str(judges),
            "--run",
            "bg",
            "--quiet",
            env=env,
            timeout=900,
        )
    st = json.loads(flask_eval("status", "bg", "--json", env=env).stdout)
    assert st["done"] == st["total"] == len(data) * 2
    rows = report_rows(env, "bg")
    judged = export(env, "bg")
    assert {r["judge"] for r in judged} == {"prom", "ours"}
    prom_raw = next(r["raw"] for r in judged if r["judge"] == "prom")
    assert "[RESULT]" in prom_raw and "[SCORES]" not in prom_raw
    for judge in ("prom", "ours"):
        mine = [r for r in rows if r["judge"] == judge]
        caps = {r["key"] for r in mine if r["dimension"] == "capability"}
        task_keys = {r["key"] for r in mine if r["dimension"] == "task"}
        assert caps == capabilities and len(caps) == 9
        assert len(task_keys) == len({t for _, t in tasks}) and len(tasks) == 75
        # BiGGen's overall, recomputed: mean over capabilities of each capability's mean
        by_cap: dict[str, list[float]] = defaultdict(list)
        for r in judged:
            if r["judge"] == judge and r["score"] is not None:
                by_cap[data[r["instance_id"]]["capability"]].append(float(r["score"]))
        expected = statistics.fmean(statistics.fmean(v) for v in by_cap.values())
        overall = next(r for r in mine if r["dimension"] == "overall" and r["key"] == "biggen")
        assert overall["mean"] == pytest.approx(expected, abs=1e-9)
        assert overall["ci_low"] <= overall["mean"] <= overall["ci_high"]
    text = flask_eval("report", "bg", env=env).stdout
    assert "mean of capability means" in text


def test_a_judge_in_flask_s_own_review_format(tmp_path: Path, sqlite_url: str) -> None:
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=2)) as sim:
        judges = judges_file(
            tmp_path,
            [
                {
                    "spec": f"openai/gpt-4-flask@{sim.openai_base_url}",
                    "name": "flaskjudge",
                    "protocol": "flask",
                },
            ],
        )
        flask_eval(
            "run",
            "--instances",
            str(EXAMPLES / "instances.jsonl"),
            "--responses",
            f"model_a={EXAMPLES / 'model_a.jsonl'}",
            "--judges",
            str(judges),
            "--run",
            "fl",
            "--quiet",
            env=env,
        )
    st = json.loads(flask_eval("status", "fl", "--json", env=env).stdout)
    assert st["done"] == st["total"] > 0
    judged = export(env, "fl")
    assert all(r["raw"].rstrip().endswith("}") for r in judged)
    assert all("[SCORES]" not in r["raw"] for r in judged)
    assert {r["score"] for r in judged} <= {1, 2, 3, 4, 5, None}


CRITERIA = """\
group: Support
criteria:
  - name: Empathy
    description: Does the response acknowledge the user's situation?
    scores: {1: Ignores it., 2: Barely., 3: Partly., 4: Mostly., 5: Fully and adapts.}
  - name: Actionability
    description: Can the user act on the response right away?
    scores: {1: Not at all., 2: Hardly., 3: Somewhat., 4: Mostly., 5: Step by step.}
    allow_na: true
"""


def _instances(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_custom_criteria_and_per_instance_flask_rubrics(tmp_path: Path, database_url: str) -> None:
    """A criteria file selected per instance, and FLASK instances carrying their own
    rubric for a skill, both judged to the end on SQLite and PostgreSQL."""
    criteria = tmp_path / "criteria.yaml"
    criteria.write_text(CRITERIA)
    base = [json.loads(line) for line in (EXAMPLES / "instances.jsonl").read_text().splitlines()]
    custom = _instances(
        tmp_path / "custom.jsonl",
        [
            {**base[0], "criteria": ["Empathy"]},
            {**base[1]},  # no field: every criterion of the file
            {**base[2], "criteria": ["Actionability", "Empathy"]},
        ],
    )
    levels = {f"score{n}_description": f"level {n} of the checklist" for n in range(1, 6)}
    rubric = {"criteria": "Is the arithmetic right, step by step?", **levels}
    hard = _instances(
        tmp_path / "hard.jsonl",
        [
            {**base[0], "rubrics": {base[0]["skill"][0]: rubric}, "system_prompt": "Be brief."},
            {**base[1]},
            {**base[2]},
        ],
    )
    answers = [json.loads(line) for line in (EXAMPLES / "model_a.jsonl").read_text().splitlines()]
    kept = {str(b["idx"]) for b in base[:3]}
    mine = _instances(
        tmp_path / "model_a.jsonl", [a for a in answers if str(a["question_id"]) in kept]
    )
    responses = f"model_a={mine}"
    env = cli_env(database_url)
    with running_simulator(SimConfig(seed=4)) as sim:
        judge = f"openai/sim-gpt@{sim.openai_base_url}"
        flask_eval(
            "run",
            "--instances",
            str(custom),
            "--criteria",
            str(criteria),
            "--responses",
            responses,
            "--judge",
            judge,
            "--run",
            "cc",
            "--quiet",
            env=env,
        )
        flask_eval(
            "run",
            "--instances",
            str(hard),
            "--responses",
            responses,
            "--judge",
            judge,
            "--run",
            "hard",
            "--quiet",
            env=env,
        )
    cc = export(env, "cc")
    by_instance = defaultdict(set)
    for r in cc:
        assert r["status"] == "done"
        by_instance[r["instance_id"]].add(r["skill"])
    ids = [str(b["idx"]) for b in base[:3]]
    assert by_instance == {
        ids[0]: {"Empathy"},
        ids[1]: {"Empathy", "Actionability"},
        ids[2]: {"Empathy", "Actionability"},
    }
    skills = {r["key"] for r in report_rows(env, "cc") if r["dimension"] == "skill"}
    assert skills == {"Empathy", "Actionability"}
    hard_rows = export(env, "hard")
    assert hard_rows and all(r["status"] == "done" for r in hard_rows)
    assert {r["skill"] for r in hard_rows if r["instance_id"] == ids[0]} == set(base[0]["skill"])


@pytest.mark.e2e
@pytest.mark.parametrize("eval_set", [MT_BENCH, VICUNA], ids=["mt-bench", "vicuna"])
def test_agreement_with_gpt4_reference_scores_of_an_eval_set(
    tmp_path: Path, sqlite_url: str, eval_set: Path
) -> None:
    """The eval set's GPT-4 scores (the mean of its three runs) become a reference rater:
    `agreement` gives Pearson / Spearman / Kendall against our judge equal to scipy's on
    the pairs recomputed here from the export and the file."""
    records = json.loads(need(eval_set).read_text())
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=1)) as sim:
        flask_eval(
            "run",
            "--prometheus-set",
            str(eval_set),
            "--judge",
            f"openai/sim-gpt@{sim.openai_base_url}",
            "--limit",
            "60",
            "--run",
            "ps",
            "--quiet",
            env=env,
        )
    out = flask_eval(
        "agreement", "ps", "--reference", f"gpt4={eval_set}", "--format", "json", env=env
    ).stdout
    wanted = {"openai/sim-gpt", "gpt4"}
    row = next(
        r
        for r in json.loads(out)["rows"]
        if {r["judge_a"], r["judge_b"]} == wanted and r["skill"] is None
    )
    # each response source is a model; an instance id starts with the record's idx
    gpt4 = {
        (r["response_source"], str(r["idx"])): statistics.fmean(r["gpt4_score"]) for r in records
    }
    pairs = [
        (float(r["score"]), gpt4[(r["model"], r["instance_id"].split("-")[0])])
        for r in export(env, "ps")
        if r["score"] is not None
    ]
    ours, theirs = zip(*pairs, strict=True)
    # 60 instances: Vicuna Bench's 4 models share each question, MT-Bench's do not
    assert row["n"] == len(pairs) == (240 if eval_set == VICUNA else 60)
    assert row["pearson"] == pytest.approx(scipy_stats.pearsonr(ours, theirs)[0], abs=1e-9)
    assert row["spearman"] == pytest.approx(scipy_stats.spearmanr(ours, theirs)[0], abs=1e-9)
    tau = scipy_stats.kendalltau(ours, theirs, variant="b")[0]
    assert row["kendall_tau_b"] == pytest.approx(tau, abs=1e-9)


BAD_BIGGEN = {
    "x1": {
        "capability": "planning",
        "task": "t",
        "system_prompt": "",
        "input": "q",
        "reference_answer": "a",
        "response": "r",
        "response_model_name": "m",
        "score_rubric": {"criteria": "c", "score1_description": "1"},
    }
}


@pytest.mark.parametrize(
    ("flag", "name", "content", "where"),
    [
        ("--biggen", "bad_biggen.json", json.dumps(BAD_BIGGEN), "x1"),
        ("--biggen", "bad_json.json", '{"x1": {"input": "q",\n  oops}}', ":2"),
        ("--prometheus-set", "bad_set.json", '[{"idx": 1, "instruction": "no markers"}]', "1"),
        ("--criteria", "bad_criteria.yaml", "criteria:\n  - name: A\n    scores: {1: x}\n", ":"),
    ],
)
def test_bad_input_of_every_new_format_is_one_line_exit_2_nothing_written(
    tmp_path: Path, flag: str, name: str, content: str, where: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    db = tmp_path / "ledger.db"
    env = cli_env(f"sqlite:///{db}")
    args = ["run", flag, str(path), "--judge", "openai/gpt-5.4", "--run", "bad"]
    if flag == "--criteria":
        args += [
            "--instances",
            str(EXAMPLES / "instances.jsonl"),
            "--responses",
            f"a={EXAMPLES / 'model_a.jsonl'}",
        ]
    proc = flask_eval(*args, env=env, check=False)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and str(path) in lines[0] and where in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not db.exists()


def test_an_unknown_protocol_in_a_judges_file_names_its_line(tmp_path: Path) -> None:
    judges = tmp_path / "judges.yaml"
    judges.write_text("- spec: openai/gpt-5.4\n  protocol: prometheus-3\n")
    db = tmp_path / "ledger.db"
    proc = flask_eval(
        "run",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--responses",
        f"a={EXAMPLES / 'model_a.jsonl'}",
        "--judges",
        str(judges),
        env=cli_env(f"sqlite:///{db}"),
        check=False,
    )
    assert proc.returncode == 2
    assert f"{judges}:2" in proc.stderr and "prometheus-3" in proc.stderr
    assert not db.exists()
