"""A run's judge card: the ledger read into ``report.probe_types.CardInputs`` and the
card computed of it (``report.probe_card``). Every run has one: a probe run's adds each
twin's effect (docs/design/probes.md); any run's card says how each judge worked
(unreadable and refused answers, latency, cost), how consistent its pairwise verdicts
were when the order swapped, and how far it is from the run's people."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from scipy import stats

from flask_eval.core.errors import FailureReason
from flask_eval.core.people import is_person
from flask_eval.core.probes import PROBE_SEPARATOR, SELF, is_twin, twin_of
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE, sample_of
from flask_eval.report.probe_card import card_of
from flask_eval.report.probe_types import (
    Card,
    CardInputs,
    JudgeOps,
    OrderedVerdicts,
    OwnScore,
    PeopleAgreement,
    TwinScore,
)
from flask_eval.rubrics.probes import word_count
from flask_eval.storage.probe_rows import LedgerRow, call_stats, finished_rows, response_texts
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

from .browse import find_run

__all__ = ["card_inputs", "load_card", "load_card_inputs"]

Item = tuple[str, str, str, str]  # judge, model, instance, criterion
#: a position's verdict as model a's result, a shown first / a shown second
_FIRST = {VERDICT_FIRST: 1.0, VERDICT_SECOND: 0.0, VERDICT_TIE: 0.5}
_SECOND = {VERDICT_FIRST: 0.0, VERDICT_SECOND: 1.0, VERDICT_TIE: 0.5}


def _judge(name: str) -> str:
    """The judge of a ledger worker (a sample ``J#k`` is judge ``J``)."""
    sample = sample_of(name)
    return name if sample is None else sample[0]


def _absolute(rows: Iterable[LedgerRow]) -> dict[Item, float]:
    """Each absolute item's score per judge, a judge's samples averaged (N/A left out)."""
    scores: dict[Item, list[int]] = defaultdict(list)
    for r in rows:
        if not r.model_b and r.done and r.score is not None:
            scores[(_judge(r.judge), r.model, r.instance, r.criterion)].append(r.score)
    return {k: float(np.mean(v)) for k, v in scores.items()}


def _twins(scores: Mapping[Item, float], texts: Mapping[tuple[str, str], str]) -> list[TwinScore]:
    out = []
    for (judge, model, instance, criterion), twin_score in scores.items():
        twin = twin_of(model)
        if twin is None or is_person(judge):
            continue
        original = scores.get((judge, twin[0], instance, criterion))
        if original is None:
            continue
        out.append(
            TwinScore(
                judge,
                twin[1],
                twin[0],
                instance,
                criterion,
                original,
                twin_score,
                word_count(texts.get((twin[0], instance), "")),
                word_count(texts.get((model, instance), "")),
            )
        )
    return out


def _own(scores: Mapping[Item, float]) -> list[OwnScore]:
    items: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
    for (judge, model, instance, criterion), score in scores.items():
        if not is_twin(model) and not is_person(judge):
            items[(model, instance, criterion)][judge] = score
    return [OwnScore(m, i, c, s) for (m, i, c), s in items.items()]


def _verdicts(rows: Iterable[LedgerRow]) -> list[OrderedVerdicts]:
    """Each pairwise comparison's result for its model a in both orders: a is the twin's
    model in a twin's comparison, else the name that sorts first."""
    seen: dict[tuple[str, str, str, str, str, str], list[float | None]] = {}
    for r in rows:
        if not r.model_b or is_person(r.judge):
            continue
        twin = twin_of(r.model) or twin_of(r.model_b)
        if twin is not None:  # a: the twin as shown; named by its model in the card
            a = r.model if twin_of(r.model) else r.model_b
            b, variant = (r.model_b if a == r.model else r.model), twin[1]
        else:
            a, b, variant = min(r.model, r.model_b), max(r.model, r.model_b), ""
        key = (r.judge, variant, r.instance, r.criterion, a, b)
        pair = seen.setdefault(key, [None, None])
        if r.done and r.score in _FIRST:
            if r.model == a:
                pair[0] = _FIRST[r.score]
            else:
                pair[1] = _SECOND[r.score]
    return [
        OrderedVerdicts(
            judge, variant, inst, crit, a.partition(PROBE_SEPARATOR)[0], b, first, second
        )
        for (judge, variant, inst, crit, a, b), (first, second) in seen.items()
    ]


def _ops(run: RunInfo, rows: list[LedgerRow], store: Store, judges: list[str]) -> list[JudgeOps]:
    counts: dict[str, dict[str, int]] = {j: defaultdict(int) for j in judges}
    for r in rows:
        judge = _judge(r.judge)
        if judge not in counts:
            continue
        c = counts[judge]
        c["rows"] += 1
        if r.done:
            c["done"] += 1
        elif r.reason == FailureReason.UNPARSEABLE.value:
            c["unparseable"] += 1
        elif r.reason == FailureReason.REFUSED.value:
            c["refused"] += 1
        else:
            c["failed"] += 1
    calls: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for s in call_stats(store, run.id):
        calls[_judge(s.judge)].append((s.calls, s.latency_ms, s.cost))
    priced = {_judge(j.name) for j in run.config.judges if j.price is not None}
    out = []
    for judge in judges:
        c, made = counts[judge], calls.get(judge, [])
        n_calls = sum(n for n, _, _ in made)
        latency = sum(n * ms for n, ms, _ in made) / n_calls if n_calls else None
        cost = sum(usd for _, _, usd in made)
        per = cost / c["done"] if judge in priced and c["done"] else None
        out.append(
            JudgeOps(judge, c["rows"], c["unparseable"], c["refused"], c["failed"], latency, per)
        )
    return out


def _people(scores: Mapping[Item, float], judges: list[str]) -> list[PeopleAgreement]:
    """Each judge against the people's mean score of the original items people rated."""
    rated: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for (judge, model, instance, criterion), score in scores.items():
        if is_person(judge) and not is_twin(model):
            rated[(model, instance, criterion)].append(score)
    if not rated:
        return []
    out = []
    for judge in judges:
        pairs = [
            (float(np.mean(p)), scores[(judge, *item)])
            for item, p in rated.items()
            if (judge, *item) in scores
        ]
        if not pairs:
            continue
        people, own = np.array(pairs).T
        varied = len(pairs) > 2 and np.ptp(people) > 0 and np.ptp(own) > 0
        out.append(
            PeopleAgreement(
                judge,
                len(pairs),
                float(stats.pearsonr(people, own)[0]) if varied else None,
                float(stats.spearmanr(people, own)[0]) if varied else None,
                float(np.mean(np.abs(people - own) <= 1)),
            )
        )
    return out


def card_inputs(store: Store, run: RunInfo) -> CardInputs:
    """What the card of ``run`` is computed from, read from the store."""
    rows = finished_rows(store, run.id)
    judges = list(dict.fromkeys(_judge(n) for n in run.config.judge_names if not is_person(n)))
    scores = _absolute(rows)
    twinned = any(is_twin(model) for _, model, _, _ in scores)
    texts = response_texts(store, run.id) if twinned else {}
    families: dict[str, Any] = dict(run.config.probes.get("families") or {})
    return CardInputs(
        run=run.name,
        judges=tuple(judges),
        twins=tuple(_twins(scores, texts)),
        verdicts=tuple(_verdicts(rows)),
        # self-preference: measured when the run probes it (it reads every judge's items)
        own=tuple(_own(scores)) if SELF in run.config.probes.get("probes", ()) else (),
        families={str(k): str(v) for k, v in families.items()},
        ops=tuple(_ops(run, rows, store, judges)),
        people=tuple(_people(scores, judges)),
    )


def load_card_inputs(store: Store, run_name: str) -> CardInputs:
    """:func:`card_inputs` of the run named ``run_name`` (NotFound: no such run)."""
    return card_inputs(store, find_run(store, run_name))


def load_card(
    store: Store,
    run_name: str,
    *,
    gate: Mapping[str, float] | None = None,
    correction: str = "holm",
    confidence: float = 0.95,
) -> Card:
    """The judge card of the run named ``run_name``."""
    inputs = load_card_inputs(store, run_name)
    return card_of(inputs, confidence=confidence, correction=correction, gate=gate)
