"""A run's judgments with their instance's turn and conversation (the FastChat export's
read: ``app.exporting.fastchat_export``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from sqlalchemy import and_, select

from flask_eval.storage.models import CALL, INSTANCE, JUDGMENT
from flask_eval.storage.store import Store

C, INS, J = CALL.c, INSTANCE.c, JUDGMENT.c


@dataclass(frozen=True)
class TurnRow:
    """One judgment: ``model_b`` "" for absolute grading; ``turn`` and ``conversation``
    None for a one-shot instruction; ``answer`` the judge's raw answer ("" when none is
    stored); ``finished`` its last update, in seconds since the epoch."""

    model: str
    model_b: str
    instance_id: str
    turn: int | None
    conversation: str | None
    criterion: str
    judge: str
    status: str
    #: the score; a rating written with a fraction (MT-Bench's ``[[8.5]]``, kept exact in
    #: the judgment's ``value``: ``rubrics.mtbench``) as written
    score: float | None
    answer: str
    finished: float


def _seconds(stamp: datetime | None) -> float:
    if stamp is None:
        return 0.0
    if stamp.tzinfo is None:  # SQLite returns the stored UTC time without its zone
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def exact_score(score: int | None, value: str | None) -> float | None:
    """A judgment's score as its judge wrote it: ``value`` when it is the exact rating the
    stored integer ``score`` rounds (halves up), else ``score``."""
    if score is None:
        return None
    if value is not None:
        try:
            exact = Decimal(value)
        except InvalidOperation:
            return int(score)
        if exact.is_finite() and exact.to_integral_value(ROUND_HALF_UP) == score:
            return float(exact)
    return int(score)


def exact_ratings(store: Store, run_id: int) -> dict[tuple[str, str, str, str], float]:
    """The run's absolute judgments whose rating was written with a fraction, by (model,
    instance, criterion, judge): the rating as written (:func:`exact_score`)."""
    stmt = select(J.model, J.instance_id, J.criterion, J.judge, J.score, J.value).where(
        J.run_id == run_id, J.model_b == "", J.score.is_not(None), J.value.is_not(None)
    )
    out: dict[tuple[str, str, str, str], float] = {}
    with store.engine.connect() as conn:
        for model, iid, crit, judge, score, value in conn.execute(stmt):
            exact = exact_score(int(score), str(value))
            if exact is not None and exact != int(score):
                out[str(model), str(iid), str(crit), str(judge)] = exact
    return out


def run_judges(store: Store, run_id: int) -> list[str]:
    """The judges with a judgment in the run, sorted."""
    stmt = select(J.judge).where(J.run_id == run_id).group_by(J.judge)
    with store.engine.connect() as conn:
        return sorted(str(j) for (j,) in conn.execute(stmt))


def turn_rows(store: Store, run_id: int, judge: str | None = None) -> Iterator[TurnRow]:
    """The run's judgments (of ``judge`` only, when given), in id order, each with its
    instance's turn and conversation and the judge's raw answer (else its rationale)."""
    stmt = (
        select(
            J.model,
            J.model_b,
            J.instance_id,
            INS.turn,
            INS.conversation,
            J.criterion,
            J.judge,
            J.status,
            J.score,
            J.value,
            C.raw,
            J.rationale,
            J.updated_at,
        )
        .outerjoin(INSTANCE, and_(INS.run_id == J.run_id, INS.instance_id == J.instance_id))
        .outerjoin(CALL, C.uid == J.call_uid)
        .where(J.run_id == run_id, *(() if judge is None else (J.judge == judge,)))
        .order_by(J.id)
    )
    with store.engine.connect() as conn:
        for row in conn.execution_options(yield_per=2000).execute(stmt):
            model, model_b, iid, turn, conv, crit, name, status, score, value, raw, why, at = row
            yield TurnRow(
                str(model),
                str(model_b or ""),
                str(iid),
                None if turn is None else int(turn),
                None if conv is None else str(conv),
                str(crit),
                str(name),
                str(status),
                exact_score(score, value),
                str(raw if raw is not None else why or ""),
                _seconds(at),
            )
