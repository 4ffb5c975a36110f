"""A run over MT-Bench's conversations, in-process with the memory judge: each turn is an
instance of the ledger (with its conversation, turn and the user's earlier turns), each
model's response to it carries the model's earlier answers, and what a worker reads to
judge a row (its JobContext) holds the conversation up to the judged turn."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select

from flask_eval.app import pipeline
from flask_eval.core import settings as settings_mod
from flask_eval.core.conversations import Turn, turn_id
from flask_eval.core.spec import run_spec
from flask_eval.storage import queries
from flask_eval.storage.browse import job_contexts
from flask_eval.storage.models import INSTANCE, JUDGMENT, RESPONSE
from flask_eval.storage.records import answers_of, instance_of
from flask_eval.storage.store import Store
from flask_eval.workers.executor_config import executor_config
from flask_eval.workers.inprocess import InProcessTransport
from tests.workers.test_judging import reset_memory_judge  # noqa: F401  (autouse)

MTBENCH = Path("/work/shared/mtbench-data")
QUESTIONS = MTBENCH / "question.jsonl"
REFERENCES = MTBENCH / "reference_answer" / "gpt-4.jsonl"

pytestmark = pytest.mark.skipif(
    not (QUESTIONS.is_file() and REFERENCES.is_file()), reason="MT-Bench data absent"
)
#: the run's one criterion
CRITERIA = """criteria:
  - name: helpfulness
    description: Does the answer serve the user's request at this turn of the conversation?
    scores: {1: Ignores it., 2: Touches it., 3: Partly., 4: Answers it., 5: Fully.}
"""


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _answer(model: str, qid: object, turn: int) -> str:
    return f"{model}'s answer to turn {turn} of question {qid}"


def _write_answers(tmp_path: Path, questions: list[dict[str, object]]) -> tuple[str, str]:
    """alpha's answers in our JSON Lines, beta's in FastChat's model_answer format."""
    alpha, beta = tmp_path / "alpha.jsonl", tmp_path / "beta.jsonl"
    ours = [
        {
            "question_id": q["question_id"],
            "turns": [_answer("alpha", q["question_id"], k) for k in (1, 2)],
        }
        for q in questions
    ]
    theirs = [
        {
            "question_id": q["question_id"],
            "answer_id": f"b{q['question_id']}",
            "model_id": "beta-7b",
            "choices": [
                {"index": 0, "turns": [_answer("beta", q["question_id"], k) for k in (1, 2)]}
            ],
            "tstamp": 1700000000.0,
        }
        for q in reversed(questions)  # any order
    ]
    alpha.write_text("".join(json.dumps(r) + "\n" for r in ours), encoding="utf-8")
    beta.write_text("".join(json.dumps(r) + "\n" for r in theirs), encoding="utf-8")
    return str(alpha), str(beta)


def test_an_mt_bench_run_plans_stores_and_judges_each_turn(tmp_path: Path) -> None:
    questions = _lines(QUESTIONS)
    references = {str(r["question_id"]): r["choices"][0]["turns"] for r in _lines(REFERENCES)}  # type: ignore[index]
    alpha, beta = _write_answers(tmp_path, questions)
    criteria = tmp_path / "criteria.yaml"
    criteria.write_text(CRITERIA, encoding="utf-8")
    plan = pipeline.prepare(
        run_spec(
            instances=str(QUESTIONS),
            criteria=str(criteria),
            responses=[f"alpha={alpha}", f"beta={beta}"],
            judges=["memory/j"],
            run_name="mt-bench",
            reference_answers=str(REFERENCES),
        )
    )
    assert len(plan.inputs.instances) == 160
    store = Store(f"sqlite:///{tmp_path / 'mt.db'}")
    try:
        settings = settings_mod.load()
        transport = InProcessTransport(store, executor_config(settings, 16))
        run = pipeline.start(plan, store, transport, settings).run
        transport.join()
        status = queries.status(store, run.id, run.name)
        # every turn of every conversation, each model, on the run's criterion (MT-Bench's
        # questions name none: they are judged on every criterion of the run)
        assert status.done == status.total == 160 * 2

        with store.engine.connect() as conn:
            per_model = dict(
                conn.execute(
                    select(JUDGMENT.c.model, func.count(func.distinct(JUDGMENT.c.instance_id)))
                    .where(JUDGMENT.c.run_id == run.id)
                    .group_by(JUDGMENT.c.model)
                ).all()
            )
            rows = (
                conn.execute(select(INSTANCE).where(INSTANCE.c.run_id == run.id)).mappings().all()
            )
            stored = {
                (r.model, r.instance_id): (r.text, answers_of(r.history))
                for r in conn.execute(select(RESPONSE).where(RESPONSE.c.run_id == run.id))
            }
            ids = list(conn.scalars(select(JUDGMENT.c.id).where(JUDGMENT.c.run_id == run.id)))
        assert per_model == {"alpha": 160, "beta": 160}

        instances = {i.id: i for i in map(instance_of, rows)}
        assert len(instances) == 160
        assert {i.skills for i in instances.values()} == {("helpfulness",)}
        assert Counter(i.capability for i in instances.values()) == Counter(
            {c: 20 for c in Counter(q["category"] for q in questions)}  # type: ignore[misc]
        )
        for q in questions:
            qid = str(q["question_id"])
            one, two = q["turns"]  # type: ignore[misc]
            first, second = instances[turn_id(qid, 1)], instances[turn_id(qid, 2)]
            assert (first.turn, first.conversation, first.instruction) == (1, qid, one)
            assert (second.turn, second.conversation, second.instruction) == (2, qid, two)
            # the reference-answer file wins; elsewhere MT-Bench's inline references stay
            refs = references.get(qid) or [*q.get("reference", []), "", ""][:2]  # type: ignore[list-item]
            assert (first.answer, second.answer) == (refs[0], refs[1])
            assert first.history == () and second.history == (Turn(one, refs[0]),)
            for model in ("alpha", "beta"):
                assert stored[(model, turn_id(qid, 1))] == (_answer(model, qid, 1), ())
                assert stored[(model, turn_id(qid, 2))] == (
                    _answer(model, qid, 2),
                    (_answer(model, qid, 1),),
                )

        # what a worker reads to judge each row: the conversation up to the judged turn
        contexts = job_contexts(store, ids)
        assert len(contexts) == len(ids)
        for ctx in contexts:
            instance = instances[ctx.instance_id]
            qid, turn = instance.conversation, instance.turn
            assert ctx.instruction == instance.instruction
            assert ctx.reference == instance.answer
            assert ctx.response == _answer(ctx.model, qid, turn)  # type: ignore[arg-type]
            assert ctx.history == instance.history
            expected = () if turn == 1 else (_answer(ctx.model, qid, 1),)
            assert ctx.answers == expected and ctx.answers_b == ()
    finally:
        store.close()
