"""A run's judgments as FastChat's MT-Bench judgment files (pure): the records
``fastchat/llm_judge/gen_judgment.py`` writes (``common.play_a_match_single`` and
``play_a_match_pair``), which its ``show_result.py`` reads.

Single-answer grading, one record per judgment::

    {"question_id", "model", "judge": [judge, criterion], "user_prompt", "judgment",
     "score", "turn", "tstamp"}

``score`` is -1 for a judgment that failed or is N/A (FastChat writes -1 for a verdict it
could not read, and ``show_result.py`` leaves every -1 out); unfinished judgments are not
written. Pairwise, one record per match (an instance, two models, a criterion, both
orders)::

    {"question_id", "model_1", "model_2", "g1_winner", "g2_winner", "judge",
     "g1_user_prompt", "g1_judgment", "g2_user_prompt", "g2_judgment", "turn", "tstamp"}

game 1 shows ``model_1`` first, game 2 ``model_2``; a winner is ``"model_1"``,
``"model_2"``, ``"tie"`` or ``"error"`` (the order failed or was not judged). ``model_1``
is the model given earlier to the run. A match with neither order finished is not
written.

``question_id`` is the conversation's id (the instance's own for a one-shot
instruction), as an integer when it is one written without leading zeros (MT-Bench's
``81``), else the text; ``turn`` is the instance's turn (1 for a one-shot instruction).
``judge`` is ``[judge name, criterion]`` where FastChat has ``[judge model, prompt
name]``; ``user_prompt`` is "" (``flask-eval view`` renders the exact prompt of a
judgment); ``judgment`` is the judge's raw answer; ``tstamp`` the time the judgment was
last written (seconds since the epoch).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from flask_eval.report.mtbench import named_winner

SINGLE_FIELDS = (
    "question_id",
    "model",
    "judge",
    "user_prompt",
    "judgment",
    "score",
    "turn",
    "tstamp",
)
PAIR_FIELDS = (
    "question_id",
    "model_1",
    "model_2",
    "g1_winner",
    "g2_winner",
    "judge",
    "g1_user_prompt",
    "g1_judgment",
    "g2_user_prompt",
    "g2_judgment",
    "turn",
    "tstamp",
)
#: FastChat's score of a judgment without one (failed, N/A)
NO_SCORE = -1
DONE, FAILED = "done", "failed"

_INTEGER = re.compile(r"0|[1-9][0-9]{0,17}")


class Judged(Protocol):
    """What a record is made of (``storage.turn_rows.TurnRow``)."""

    @property
    def model(self) -> str: ...
    @property
    def model_b(self) -> str: ...
    @property
    def instance_id(self) -> str: ...
    @property
    def turn(self) -> int | None: ...
    @property
    def conversation(self) -> str | None: ...
    @property
    def criterion(self) -> str: ...
    @property
    def judge(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def score(self) -> float | None: ...
    @property
    def answer(self) -> str: ...
    @property
    def finished(self) -> float: ...


def question_id(row: Judged) -> int | str:
    """The conversation's id (the instance's for a one-shot one), an int when it is
    written as one without leading zeros."""
    qid = row.conversation if row.conversation is not None else row.instance_id
    return int(qid) if _INTEGER.fullmatch(qid) else qid


def single_records(rows: Iterable[Judged]) -> Iterator[dict[str, Any]]:
    """FastChat's single-answer records of absolute judgments (unfinished ones skipped)."""
    for row in rows:
        if row.model_b or row.status not in (DONE, FAILED):
            continue
        scored = row.status == DONE and row.score is not None
        yield {
            "question_id": question_id(row),
            "model": row.model,
            "judge": [row.judge, row.criterion],
            "user_prompt": "",
            "judgment": row.answer,
            "score": row.score if scored else NO_SCORE,
            "turn": row.turn or 1,
            "tstamp": row.finished,
        }


def _winner(row: Judged | None, first: str) -> str:
    """The winner of a game in which ``first`` ("model_1" or "model_2") was shown first."""
    judged = row is not None and row.status == DONE and row.score is not None
    return named_winner(
        int(row.score) if judged and row is not None and row.score is not None else None, first
    )


def pair_records(rows: Iterable[Judged], models: Sequence[str] = ()) -> list[dict[str, Any]]:
    """FastChat's pairwise records of pairwise judgments: one per match, in the order of
    its first finished order; ``model_1`` is the model earlier in ``models`` (then by
    name)."""
    rank = {m: k for k, m in enumerate(models)}
    games: dict[tuple[str, str, str, str, str], list[Judged | None]] = {}
    for row in rows:
        if not row.model_b or row.status not in (DONE, FAILED):
            continue
        one, two = sorted((row.model, row.model_b), key=lambda m: (rank.get(m, len(rank)), m))
        both = games.setdefault((row.instance_id, one, two, row.criterion, row.judge), [None, None])
        both[0 if row.model == one else 1] = row
    out = []
    for (_, one, two, criterion, judge), (g1, g2) in games.items():
        some = g1 if g1 is not None else g2
        assert some is not None  # a match is made of a finished order
        out.append(
            {
                "question_id": question_id(some),
                "model_1": one,
                "model_2": two,
                "g1_winner": _winner(g1, "model_1"),
                "g2_winner": _winner(g2, "model_2"),
                "judge": [judge, criterion],
                "g1_user_prompt": "",
                "g1_judgment": g1.answer if g1 is not None else "",
                "g2_user_prompt": "",
                "g2_judgment": g2.answer if g2 is not None else "",
                "turn": some.turn or 1,
                "tstamp": max(r.finished for r in (g1, g2) if r is not None),
            }
        )
    return out
