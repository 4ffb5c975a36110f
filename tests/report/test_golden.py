"""Golden text reports: fixed small runs (several models, 2 judges) written into a ledger,
reported as `flask-eval report` prints them, compared with the files in ``golden/``.

A change to the text report shows up here as a diff to read. After an intended change,
regenerate the files and review the diff before committing them::

    FLASK_EVAL_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest tests/report/test_golden.py

The runs are planned as `run` plans them (``tests.report.ledger``) and finished by a hash
of each row, so neither a simulator nor a prompt change moves them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from flask_eval.app.report import build_report
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.report.render import to_table
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.report.ledger import Outcome, Row, finish, judges, planned_run

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = os.environ.get("FLASK_EVAL_REGENERATE_GOLDEN") == "1"
#: models of the absolute runs and how good their responses are (names long and alike)
QUALITY = {
    "gpt4": 4.3,
    "llama2_chat_13b": 3.1,
    "alpaca_13b": 2.6,
    "response-1": 3.6,
    "response-2": 3.4,
}


def _unit(*parts: str) -> float:
    digest = hashlib.blake2b("|".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _score(row: Row) -> Outcome:
    u = _unit(row.model, row.instance_id, row.criterion, row.judge)
    if u < 0.03:
        return "failed", None
    if u < 0.06:
        return "done", None  # N/A
    shift = -0.4 if row.judge == "strict" else 0.2
    noise = (_unit("noise", row.model, row.instance_id, row.criterion, row.judge) - 0.5) * 2.4
    return "done", max(1, min(5, round(QUALITY[row.model] + shift + noise)))


def _responses(tmp_path: Path, models: list[str]) -> list[str]:
    """Each model's responses to the example instances (some skipped)."""
    lines = (EXAMPLES / "instances.jsonl").read_text().splitlines()
    ids = [json.loads(line)["idx"] for line in lines]
    args = []
    for model in models:
        path = tmp_path / f"{model}.jsonl"
        kept = [i for i in ids if _unit("answered", model, str(i)) > 0.08]
        path.write_text(
            "".join(json.dumps({"question_id": i, "text": f"{model} on {i}"}) + "\n" for i in kept)
        )
        args.append(f"{model}={path}")
    return args


def _biggen_file(tmp_path: Path) -> Path:
    """A small BiGGen Bench file (one model's responses, as BiGGen's files hold): three
    capabilities, their tasks, and one llm_judge task."""
    tasks = {
        "grounding": ["role_playing", "false_context"],
        "refinement": ["essay_revision", "llm_judge_absolute"],
        "planning": ["travel_plan", "executable_planning", "personal_assistant"],
    }
    data = {}
    for capability, names in tasks.items():
        for task in names:
            for k in range(3):
                key = f"{capability}_{task}_{k}"
                data[key] = {
                    "id": key,
                    "capability": capability,
                    "task": task,
                    "instance_idx": k,
                    "system_prompt": "",
                    "input": f"{task} {k}",
                    "reference_answer": "ref",
                    "score_rubric": {
                        "criteria": f"{task}?",
                        **{f"score{n}_description": f"level {n}" for n in range(1, 6)},
                    },
                    "response": f"answer to {key}",
                    "response_model_name": "llama2_chat_13b",
                }
    path = tmp_path / "biggen.json"
    path.write_text(json.dumps(data))
    return path


def _check(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if REGENERATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        pytest.skip(f"regenerated {path}")
    assert path.exists(), f"no golden file {path}: regenerate (see this module's docstring)"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"the text report differs from {path} (see the docstring)"


def _report(tmp_path: Path, name: str, outcome: Callable[[Row], Outcome], **plan: object) -> str:
    store = Store(f"sqlite:///{tmp_path / f'{name}.db'}")
    run = planned_run(store, name, **plan)
    finish(store, run, outcome)
    report = build_report(store, run, replicates=200, seed=0, progress=False)
    store.close()
    return to_table(report)


def test_golden_flask_report(tmp_path: Path) -> None:
    """Five models (two named alike, as Auto-J's are), two judges, FLASK's skills."""
    text = _report(
        tmp_path,
        "golden-flask",
        _score,
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=_responses(tmp_path, list(QUALITY)),
        judges=judges("strict", "lenient"),
    )
    assert len(text.splitlines()) < 150
    _check("flask", text)


def test_golden_biggen_report(tmp_path: Path) -> None:
    """One model (a BiGGen file holds one), two judges: BiGGen's overall leads; tasks sit
    under their capabilities; the llm_judge task is left out and the notes say so."""
    biggen = str(_biggen_file(tmp_path))
    text = _report(
        tmp_path,
        "golden-biggen",
        _score,
        instances=None,
        responses=(),
        biggen=biggen,
        judges=judges("strict", "lenient"),
    )
    _check("biggen", text)


def _verdict(row: Row) -> Outcome:
    shown_first = QUALITY[row.model] - QUALITY[row.model_b]
    u = _unit(row.model, row.model_b, row.instance_id, row.judge)
    if u < 0.03:
        return "failed", None
    bias = 0.6 if row.judge == "strict" else 0.2  # strict likes the response shown first
    d = shown_first + bias + (_unit("noise", row.model, row.instance_id, row.judge) - 0.5) * 3
    return "done", VERDICT_TIE if abs(d) < 0.2 else VERDICT_FIRST if d > 0 else VERDICT_SECOND


def test_golden_pairwise_report(tmp_path: Path) -> None:
    """Four models, every pair in both orders, two judges: leaderboards, win-rate
    matrices with whole names, position bias, comparisons with a failed order apart."""
    models = ["gpt4", "response-1", "response-2", "alpaca_13b"]
    text = _report(
        tmp_path,
        "golden-pairwise",
        _verdict,
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=_responses(tmp_path, models),
        judges=judges("strict", "lenient"),
        pairwise="all",
    )
    _check("pairwise", text)
