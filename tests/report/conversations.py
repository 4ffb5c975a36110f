"""Runs of two-turn conversations written straight into a ledger (MT-Bench's shape: one
instance per turn, its category as the capability), finished by a seeded function of each
row: single-answer grades 1-10 or pairwise verdicts with ties, with failed, N/A and
unfinished judgments among them. No judge is called."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from sqlalchemy import update

from flask_eval.core.conversations import Turn, turn_id
from flask_eval.core.types import VERDICTS, Instance, Response, ResponseSet
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

MODELS = ("gpt-4", "vicuna-13b", "alpaca-13b")
JUDGES = ("gpt4-judge", "claude-judge")
CRITERION = "mt_bench"
#: MT-Bench-like conversations: id -> category (ids as FastChat's, and two that are not
#: integers as written)
CONVERSATIONS = {
    "81": "writing",
    "82": "roleplay",
    "111": "math",
    "112": "math",
    "121": "reasoning",
    "131": "coding",
    "007": "stem",
    "h1": "humanities",
}


@dataclass(frozen=True)
class Judged:
    """One finished judgment as the test's own record: (status, score, and the rating as
    written when it has a fraction: ``exact``)."""

    model: str
    model_b: str
    instance_id: str
    judge: str
    status: str
    score: int | None
    exact: float | None = None

    @property
    def written(self) -> float | None:
        """The rating as the judge wrote it (what FastChat averages)."""
        return self.exact if self.exact is not None else self.score


def instances() -> list[Instance]:
    out = []
    for conv, category in CONVERSATIONS.items():
        for turn in (1, 2):
            out.append(
                Instance(
                    id=turn_id(conv, turn),
                    instruction=f"question {conv} turn {turn}",
                    answer="",
                    skills=(CRITERION,),
                    capability=category,
                    turn=turn,
                    conversation=conv,
                    history=(Turn(f"question {conv} turn 1"),) if turn == 2 else (),
                )
            )
    return out


def response_sets(items: Sequence[Instance]) -> list[ResponseSet]:
    return [
        ResponseSet(
            m,
            f"{m}.jsonl",
            tuple(
                Response(
                    m,
                    x.id,
                    f"{m} answers {x.id}",
                    history=(f"{m} answers turn 1",) if x.turn == 2 else (),
                )
                for x in items
            ),
        )
        for m in MODELS
    ]


def create(store: Store, name: str, *, pairwise: bool, swap: bool = True) -> RunInfo:
    items = instances()
    config: dict[str, Any] = {"judges": list(JUDGES), "models": list(MODELS), "skills": []}
    pairs = None
    if pairwise:
        config["pairwise"] = {"plan": "all", "swap": swap}
        pairs = [p for a, b in combinations(MODELS, 2) for p in ((a, b), (b, a))[: 1 + swap]]
    run, _ = store.create_run(
        name=name,
        fingerprint=name[0] * 64,
        mode="instance",
        config=config,
        instances=items,
        response_sets=response_sets(items),
        judges=list(JUDGES),
        pairs=pairs,
    )
    return run


def finish(store: Store, run: RunInfo, seed: int, *, pairwise: bool) -> list[Judged]:
    """Every row done with a seeded grade (1-10) or verdict (first, second, tie), some
    failed, N/A (single) or left pending; returns the finished ones."""
    rng = random.Random(seed)
    j = JUDGMENT.c
    bias = {m: k for k, m in enumerate(MODELS)}
    judged = []
    with store.engine.begin() as conn:
        rows = conn.execute(
            JUDGMENT.select()
            .with_only_columns(j.id, j.model, j.model_b, j.instance_id, j.judge)
            .where(j.run_id == run.id)
            .order_by(j.id)
        ).all()
        for rid, model, model_b, iid, judge in rows:
            u = rng.random()
            if u < 0.05:
                continue  # pending: not finished
            if u < 0.13:
                status, score = "failed", None
            elif u < 0.17 and not pairwise:
                status, score = "done", None  # N/A
            elif pairwise:
                status, score = "done", rng.choice(VERDICTS)
            else:
                turn2 = iid.endswith(":t2")
                score = min(10, max(1, round(rng.gauss(8 - 2 * bias[model] - turn2, 2))))
                status = "done"
            value = None  # a rating written with a fraction: stored rounded, exact in value
            if not pairwise and score is not None and score > 1 and rng.random() < 0.2:
                value = f"{score - 0.5}"  # 7.5 is stored as 8 (halves up)
            done = {"status": status, "score": score, "value": value}
            conn.execute(update(JUDGMENT).where(j.id == rid).values(**done))
            exact = None if value is None else float(value)
            judged.append(Judged(model, model_b, iid, judge, status, score, exact))
    return judged
