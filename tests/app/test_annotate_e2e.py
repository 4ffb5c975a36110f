"""`flask-eval annotate` end to end in-process: two simulated annotators label FLASK's
instances behind the real OpenAI SDK (its first 200 here; all 1,740 in the closing note of
issue 22); the labels combine into FLASK's instance
file, which `run` reads as is; `--compare` prints the agreement with FLASK's own labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval.core.types import DOMAINS
from flask_eval.rubrics.skills import load_default
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval

N = 200


@pytest.mark.e2e
def test_two_annotators_label_flasks_instances_and_agree_with_flasks_labels(
    tmp_path: Path, sqlite_url: str, flask_data: Path
) -> None:
    given = flask_data / "evaluation_set" / "flask_evaluation.jsonl"
    first = [json.loads(line) for line in given.read_text().splitlines()[:N]]
    distinct = len({(r["instruction"], r["answer"]) for r in first})
    out = tmp_path / "labelled.jsonl"
    with running_simulator(SimConfig(seed=3)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        result = flask_eval(
            "annotate",
            "--instances",
            str(given),
            "--annotator",
            "a1=openai/a1",
            "--annotator",
            "a2=openai/a2",
            "--relabel",
            "--compare",
            str(given),
            "--limit",
            str(N),
            "--out",
            str(out),
            "--quiet",
            env=env,
        )
        asked = sim.stats()["requests"]
    # one call per distinct prompt and annotator (the answer cache answers a repeated
    # instance), every answer readable at once
    assert asked == 2 * distinct
    labelled = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(labelled) == N
    skills, domains = set(load_default().names), set(DOMAINS)
    for r in labelled:
        assert len(r["skill"]) == 3 == len(set(r["skill"])) and set(r["skill"]) <= skills
        assert 1 <= len(r["domain"]) <= 2 and set(r["domain"]) <= domains
        assert r["annotation"]["annotators"] == ["a1", "a2"]
    text = result.stdout
    assert f"{N} instances labelled by 2 annotators" in text
    assert f"Annotation agreement with the given labels: {N} instances in both" in text
    for statistic in (
        "exact match (same order)",
        "mean overlap",
        "any overlap",
        "within 1",
        "kappa, quadratic weights",
    ):
        assert statistic in text
    # the labelled file is ready for `run` as it is
    with running_simulator(SimConfig(seed=3)) as sim:
        env = cli_env(sqlite_url, OPENAI_BASE_URL=sim.openai_base_url)
        responses = tmp_path / "m.jsonl"
        responses.write_text(
            "".join(
                json.dumps({"question_id": r["idx"], "text": "ok"}) + "\n" for r in labelled[:5]
            )
        )
        flask_eval(
            "run",
            "--instances",
            str(out),
            "--responses",
            f"m={responses}",
            "--judge",
            "openai/j",
            "--run",
            "uses-labels",
            "--quiet",
            env=env,
        )


def test_labels_outside_flasks_sets_are_one_line_exit_2_and_nothing_written(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "labels.jsonl"
    record = json.loads((EXAMPLES / "instances.jsonl").read_text().splitlines()[0])
    bad.write_text(json.dumps({**record, "domain": ["Astrology"]}) + "\n")
    db = tmp_path / "never.db"
    result = flask_eval(
        "annotate",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--annotator",
        "openai/a",
        "--relabel",
        "--compare",
        str(bad),
        "--out",
        str(tmp_path / "o.jsonl"),
        env=cli_env(f"sqlite:///{db}"),
        check=False,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"{bad}:1: unknown domain 'Astrology'" in lines[0]
    assert not db.exists() and not (tmp_path / "o.jsonl").exists()
