"""MT-Bench's conversations judged by `mt-bench` judges are planned as FastChat judges
MT-Bench (producer/mtbench_judging.py): one overall rating per turn, and a reference shown
for math, reasoning and coding conversations only; other runs are planned as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval.app import pipeline
from flask_eval.core.spec import run_spec
from flask_eval.rubrics.skills import load_default

CONVERSATIONS = [
    {"question_id": 1, "category": "math", "turns": ["2+2?", "And 3+3?"], "reference": ["4", "6"]},
    {
        "question_id": 2,
        "category": "stem",
        "turns": ["Why?", "How?"],
        "reference": ["So.", "Thus."],
    },
    {"question_id": 3, "turns": ["Hi?", "Bye?"], "reference": ["Hello.", "Goodbye."]},
]
CRITERIA = """criteria:
  - name: helpfulness
    description: Does the answer help?
    scores: {1: No., 2: Barely., 3: Partly., 4: Mostly., 5: Fully.}
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    questions, answers = tmp_path / "q.jsonl", tmp_path / "a.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in CONVERSATIONS))
    answers.write_text(
        "".join(
            json.dumps({"question_id": q["question_id"], "turns": ["x", "y"]}) + "\n"
            for q in CONVERSATIONS
        )
    )
    judges, mixed = tmp_path / "j.yaml", tmp_path / "mixed.yaml"
    judges.write_text("- spec: openai/j\n  protocol: mt-bench\n")
    mixed.write_text("- spec: openai/j\n  protocol: mt-bench\n- spec: openai/k\n")
    criteria = tmp_path / "c.yaml"
    criteria.write_text(CRITERIA)
    return {
        "instances": str(questions),
        "answers": str(answers),
        "judges": str(judges),
        "mixed": str(mixed),
        "criteria": str(criteria),
    }


def _plan(files: dict[str, str], judges: str = "judges", **extra: object) -> pipeline.Plan:
    return pipeline.prepare(
        run_spec(
            instances=files["instances"],
            responses=[f"a={files['answers']}", f"b={files['answers']}"],
            judges_files=[files[judges]],
            run_name="mt",
            **extra,
        )
    )


def _references(plan: pipeline.Plan) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {i.id: (i.answer, tuple(t.reference for t in i.history)) for i in plan.inputs.instances}


def test_mt_bench_judges_rate_each_turn_overall_with_references_where_mt_bench_shows_them(
    files: dict[str, str],
) -> None:
    plan = _plan(files)
    assert plan.skillset.names == ("overall",)
    assert {i.skills for i in plan.inputs.instances} == {("overall",)}
    assert _references(plan) == {
        "1:t1": ("4", ()),
        "1:t2": ("6", ("4",)),
        "2:t1": ("", ()),  # STEM: judged without a reference, as FastChat does
        "2:t2": ("", ("",)),
        "3:t1": ("Hello.", ()),  # no category: its references stay
        "3:t2": ("Goodbye.", ("Hello.",)),
    }
    paired = _plan(files, pairwise="all")
    assert {i.skills for i in paired.inputs.instances} == {("overall",)}
    assert _references(paired) == _references(plan)


def test_other_runs_are_planned_as_before(files: dict[str, str]) -> None:
    flask = load_default().names
    mixed = _plan(files, "mixed")
    assert mixed.skillset.names == flask
    assert _references(mixed)["2:t2"] == ("Thus.", ("So.",))
    own = _plan(files, criteria=files["criteria"])
    assert own.skillset.names == ("helpfulness",)
    assert _references(own)["2:t1"] == ("", ())  # still MT-Bench's references
