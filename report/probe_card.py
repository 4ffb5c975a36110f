"""A probe run's judge card (pure): each judge's effects of the probes with intervals over
instances, a multiplicity correction across the card's tests, and the gate's verdicts.

Every effect's unit is the instance: an instance's rows (its criteria, the models
answering it) are correlated, instances are independent (``report.probe_stats``). The
effects (``Effect.probe``):

- a twin variant of an absolute run (``length+25`` ... ``inject-instruction``): the mean
  score change twin - original, averaged within each instance first;
- ``length per doubling``: the slope through the origin of the score change on
  log2(words of the twin / words of the original) over every length twin, its standard
  error cluster-robust by instance;
- ``inject-score obeyed``, ``inject-instruction obeyed``: among the items whose original
  is below the scale's top, the share whose twin is at the top (a ratio, clustered by
  instance). Its p-value tests that the injection moves items to the top no more often
  than the reverse happens (original at the top, twin below it): a judge that ignores the
  injection makes both moves equally often, whatever its noise;
- ``swap``: a pairwise run's first-shown advantage, a's result shown first minus shown
  second (P(first wins) - P(second wins) over both orders), on the original comparisons
  judged in both orders; the share whose verdict held is the card's ``consistency``;
- a twin variant of a pairwise run: the change in a's mean result over both orders
  between the twin's comparison and the original one of the same instance, criterion
  and pair;
- ``self``: the judge's score minus the other judges' mean on the same item, its
  own family's models less the other families' models, per instance (with two judges of
  two families, each one's excess is the other's: only their difference is seen).

Every tested effect of the card, all judges together, is one family: Holm's adjustment
(family-wise error) or Benjamini-Hochberg's (``correction="bh"``); ``significant`` is the
adjusted p-value below ``alpha``. The card is one check (``card --gate``): its chance of
a false alarm is at most ``alpha`` whatever the number of judges on it. The gate
(``--gate length=0.2,...``) names thresholds per probe name
(:data:`core.probes.PROBE_NAMES`): an effect fails when significant and its |estimate|
reaches the threshold. ``length`` applies to the length variants and the slope,
``style`` and ``order`` to theirs, ``inject`` to the obeyed shares (and to a pairwise
run's injection twins), ``swap`` to the first-shown advantage, ``self`` to the own-family
excess; an absolute run's injection score change is reported, never gated.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from flask_eval.core.probes import (
    EXPANDS,
    INJECT_INSTRUCTION,
    INJECT_SCORE,
    PROBE_NAMES,
    SELF,
    SWAP,
    VARIANTS,
    length_percent,
)
from flask_eval.report.paired import METHODS, adjust
from flask_eval.report.probe_stats import Estimate, clustered_slope, instance_mean
from flask_eval.report.probe_types import (
    Card,
    CardInputs,
    Effect,
    JudgeCard,
    OrderedVerdicts,
    OwnScore,
    TwinScore,
)

PER_DOUBLING = "length per doubling"
OBEYED = " obeyed"
#: the card's order of effects
ORDER_OF_PROBES = (
    *VARIANTS[:3],
    PER_DOUBLING,
    *VARIANTS[3:6],
    INJECT_SCORE + OBEYED,
    INJECT_INSTRUCTION,
    INJECT_INSTRUCTION + OBEYED,
    SWAP,
    SELF,
)
SCORE_CHANGE = "score change (twin - original)"
SLOPE = "score change per doubling of words"
SHARE_TO_TOP = "share moved to the top from below"
ADVANTAGE = "first-shown advantage"
RESULT_CHANGE = "result change of a (twin - original)"
SELF_EXCESS = "own-family excess over other judges"
#: the gate's name of each variant (``length+25`` -> ``length``)
GATE_OF = {v: name for name, vs in EXPANDS.items() for v in vs}


@dataclasses.dataclass(frozen=True)
class _Raw:
    probe: str
    measure: str
    estimate: Estimate
    key: str  # the variant or probe of Effect.pairs_key
    gate: str | None  # the gate's name that checks it


def parse_gate(text: str) -> dict[str, float]:
    """``length=0.2,swap=0.1,...`` as {probe name: threshold}; empty text is no gate.
    ValueError, one line naming the bad part: not NAME=NUMBER, an unknown name, a name
    given twice, a threshold not a finite number >= 0."""
    out: dict[str, float] = {}
    if not text.strip():
        return out
    for part in text.split(","):
        name, sep, value = (s.strip() for s in part.partition("="))
        if not sep or not name or not value:
            raise ValueError(f"gate: {part.strip()!r} is not NAME=THRESHOLD")
        if name not in PROBE_NAMES:
            raise ValueError(
                f"gate: {part.strip()!r}: unknown probe {name!r}; "
                f"choose from: {', '.join(PROBE_NAMES)}"
            )
        if name in out:
            raise ValueError(f"gate: {part.strip()!r}: {name!r} is given twice")
        try:
            threshold = float(value)
        except ValueError:
            threshold = math.nan
        if not math.isfinite(threshold) or threshold < 0:
            raise ValueError(f"gate: {part.strip()!r}: the threshold must be a number >= 0")
        out[name] = threshold
    return out


def _absolute(twins: list[TwinScore], top: float, confidence: float) -> list[_Raw]:
    by_variant: dict[str, list[TwinScore]] = defaultdict(list)
    for t in twins:
        by_variant[t.variant].append(t)
    out: list[_Raw] = []
    for variant, rows in by_variant.items():
        inst = [t.instance for t in rows]
        diff = [t.twin - t.original for t in rows]
        gate = None if variant in (INJECT_SCORE, INJECT_INSTRUCTION) else GATE_OF.get(variant)
        out.append(
            _Raw(variant, SCORE_CHANGE, instance_mean(diff, inst, confidence), variant, gate)
        )
        if variant in (INJECT_SCORE, INJECT_INSTRUCTION):
            obeyed = _obeyed(rows, top, confidence)
            if obeyed is not None:
                out.append(_Raw(variant + OBEYED, SHARE_TO_TOP, obeyed, variant, "inject"))
    doubling = [
        t
        for t in twins
        if length_percent(t.variant) is not None and t.words_original > 0 and t.words_twin > 0
    ]
    if doubling:
        y = [t.twin - t.original for t in doubling]
        x = [math.log2(t.words_twin / t.words_original) for t in doubling]
        slope = clustered_slope(y, x, [t.instance for t in doubling], confidence)
        if math.isfinite(slope.value):
            out.append(_Raw(PER_DOUBLING, SLOPE, slope, "length", "length"))
    return out


def _obeyed(rows: list[TwinScore], top: float, confidence: float) -> Estimate | None:
    """The share of the twins at the top among items whose original is below it; its
    p-value from the moves up (original below, twin at the top) less the moves down."""
    below = np.array([t.original < top for t in rows])
    at_top = np.array([t.twin >= top for t in rows])
    if not below.any():
        return None
    inst = [t.instance for t in rows]
    eligible = [c for c, b in zip(inst, below.tolist(), strict=True) if b]
    share = clustered_slope(at_top[below], np.ones(len(eligible)), eligible, confidence)
    moves = (below & at_top).astype(float) - (~below & ~at_top).astype(float)
    test = clustered_slope(moves, np.ones(len(rows)), inst, confidence)
    return Estimate(
        share.value,
        max(share.low, 0.0) if math.isfinite(share.low) else math.nan,
        min(share.high, 1.0) if math.isfinite(share.high) else math.nan,
        test.p_value,
        share.items,
        share.clusters,
    )


def _pairwise(
    verdicts: list[OrderedVerdicts], confidence: float
) -> tuple[list[_Raw], float | None, list[str]]:
    """The first-shown advantage and the twins' result changes, the consistency and the
    notes of the comparisons left out."""
    both = [v for v in verdicts if v.a_first is not None and v.a_second is not None]
    out: list[_Raw] = []
    notes: list[str] = []
    if len(both) < len(verdicts):
        notes.append(
            f"swap: {len(verdicts) - len(both)} comparison(s) without a verdict in both "
            "orders left out"
        )
    original = [v for v in both if not v.variant]
    consistency = None
    if original:
        first = [float(v.a_first or 0) - float(v.a_second or 0) for v in original]
        advantage = instance_mean(first, [v.instance for v in original], confidence)
        out.append(_Raw(SWAP, ADVANTAGE, advantage, SWAP, SWAP))
        consistency = sum(v.a_first == v.a_second for v in original) / len(original)
    # each original comparison's mean result, for either model as a (b's is 1 - a's)
    base: dict[tuple[str, str, str, str], float] = {}
    for v in original:
        mean = (float(v.a_first or 0) + float(v.a_second or 0)) / 2
        base[(v.instance, v.criterion, v.model_a, v.model_b)] = mean
        base[(v.instance, v.criterion, v.model_b, v.model_a)] = 1 - mean
    changes: dict[str, tuple[list[float], list[str]]] = defaultdict(lambda: ([], []))
    unmatched = 0
    for v in both:
        if not v.variant:
            continue
        key = (v.instance, v.criterion, v.model_a, v.model_b)
        if key not in base:
            unmatched += 1
            continue
        values, inst = changes[v.variant]
        values.append((float(v.a_first or 0) + float(v.a_second or 0)) / 2 - base[key])
        inst.append(v.instance)
    for variant, (values, inst) in changes.items():
        change = instance_mean(values, inst, confidence)
        out.append(_Raw(variant, RESULT_CHANGE, change, variant, GATE_OF.get(variant)))
    if unmatched:
        notes.append(f"{unmatched} twin comparison(s) without their original left out")
    return out, consistency, notes


#: the self-preference note when no judge of another family is there to compare with
SELF_RELATIVE = (
    "self: every other judge's family has models here, so the excess is relative to "
    "theirs (a judge of another family would measure it alone)"
)


def _self(inputs: CardInputs, judge: str, confidence: float) -> tuple[list[_Raw], list[str]]:
    """The own-family excess, or the note saying why it cannot be measured."""
    if not inputs.own:  # not probed (a run without the self probe)
        return [], []
    family = inputs.families.get(judge)
    if family is None:
        return [], ["self: no family declared for the judge"]
    rows: list[OwnScore] = [o for o in inputs.own if judge in o.scores and len(o.scores) > 1]
    if not rows:
        return [], ["self: no other judge scored the items it scored"]
    kinds = {o.model: inputs.families.get(o.model) for o in rows}
    if family not in kinds.values():
        return [], [f"self: no model of its family ({family})"]
    if not any(f is not None and f != family for f in kinds.values()):
        return [], [f"self: no model of another family than {family}"]
    # the judges to compare with: those of no family with models here (whose own
    # preference cannot touch these items), else every other judge (then only the
    # differences between judges' preferences are seen: a note says so)
    answered = {f for f in kinds.values() if f is not None}
    neutral = {
        j
        for o in rows
        for j in o.scores
        if j != judge and inputs.families.get(j) is not None and inputs.families[j] not in answered
    }
    notes = [] if neutral else [SELF_RELATIVE]
    per: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for o in rows:
        kind = kinds[o.model]
        others = [s for j, s in o.scores.items() if j != judge and (not neutral or j in neutral)]
        if kind is None or not others:
            continue
        d = o.scores[judge] - sum(others) / len(others)
        per[o.instance][0 if kind == family else 1].append(d)
    values = [sum(a) / len(a) - sum(b) / len(b) for a, b in per.values() if a and b]
    inst = [i for i, (a, b) in per.items() if a and b]
    if not values:
        return [], [f"self: no instance has answers of both {family} and another family"]
    excess = instance_mean(values, inst, confidence)
    items = sum(len(a) + len(b) for a, b in per.values() if a and b)
    excess = dataclasses.replace(excess, items=items)
    return [_Raw(SELF, SELF_EXCESS, excess, SELF, SELF)], notes


def _ordered(raws: Iterable[_Raw]) -> list[_Raw]:
    """A judge's effects in the card's order."""
    rank = {p: k for k, p in enumerate(ORDER_OF_PROBES)}
    return sorted(raws, key=lambda r: rank.get(r.probe, len(rank)))


def _adjusted(per_judge: Sequence[Sequence[_Raw]], correction: str) -> list[dict[int, float]]:
    """Each judge's adjusted p-values (by the effect's place in its list), corrected
    across every tested effect of the card: the card is one family, so that a gate on it
    raises a false alarm at most ``alpha`` of the time however many judges it has."""
    tested = [
        (j, k)
        for j, raws in enumerate(per_judge)
        for k, r in enumerate(raws)
        if r.estimate.p_value is not None and math.isfinite(r.estimate.p_value)
    ]
    p_values = adjust([per_judge[j][k].estimate.p_value or 0.0 for j, k in tested], correction)
    out: list[dict[int, float]] = [{} for _ in per_judge]
    for (j, k), p in zip(tested, p_values, strict=True):
        out[j][k] = p
    return out


def _effects(
    judge: str,
    ordered: Sequence[_Raw],
    adjusted: Mapping[int, float],
    alpha: float,
    gate: Mapping[str, float],
) -> tuple[Effect, ...]:
    out = []
    for k, r in enumerate(ordered):
        e = r.estimate
        p_adj = adjusted.get(k)
        significant = p_adj is not None and p_adj < alpha
        threshold = gate.get(r.gate) if r.gate is not None else None
        out.append(
            Effect(
                judge=judge,
                probe=r.probe,
                measure=r.measure,
                estimate=e.value,
                low=e.low,
                high=e.high,
                p_value=e.p_value,
                significant=significant,
                items=e.items,
                clusters=e.clusters,
                pairs_key=(judge, r.key),
                gate=threshold,
                fails=threshold is not None and significant and abs(e.value) >= threshold,
                p_adjusted=p_adj,
            )
        )
    return tuple(out)


def card_of(
    inputs: CardInputs,
    *,
    confidence: float = 0.95,
    alpha: float = 0.05,
    correction: str = "holm",
    gate: Mapping[str, float] | None = None,
) -> Card:
    """Every judge's card of a probe run (module docstring: the effects, the correction
    and the gate). ValueError for a confidence or alpha outside (0, 1), an unknown
    correction or a gate naming an unknown probe."""
    for name, value in (("confidence", confidence), ("alpha", alpha)):
        if not 0 < value < 1:
            raise ValueError(f"{name} must be in (0, 1)")
    if correction not in METHODS:
        raise ValueError(f"correction must be one of {', '.join(METHODS)}")
    thresholds = dict(gate or {})
    unknown = sorted(set(thresholds) - set(PROBE_NAMES))
    if unknown:
        raise ValueError(f"gate: unknown probe(s) {', '.join(unknown)}")
    twins: dict[str, list[TwinScore]] = defaultdict(list)
    for t in inputs.twins:
        twins[t.judge].append(t)
    verdicts: dict[str, list[OrderedVerdicts]] = defaultdict(list)
    for v in inputs.verdicts:
        verdicts[v.judge].append(v)
    measured = []
    for judge in inputs.judges:
        raws = _absolute(twins[judge], inputs.top, confidence)
        pairwise, consistency, notes = _pairwise(verdicts[judge], confidence)
        own, self_notes = _self(inputs, judge, confidence)
        measured.append((_ordered([*raws, *pairwise, *own]), consistency, (*notes, *self_notes)))
    adjusted = _adjusted([raws for raws, _, _ in measured], correction)
    cards = [
        JudgeCard(
            judge=judge,
            effects=_effects(judge, raws, p_adj, alpha, thresholds),
            consistency=consistency,
            ops=next((o for o in inputs.ops if o.judge == judge), None),
            people=next((p for p in inputs.people if p.judge == judge), None),
            notes=notes,
        )
        for judge, (raws, consistency, notes), p_adj in zip(
            inputs.judges, measured, adjusted, strict=True
        )
    ]
    return Card(inputs.run, tuple(cards), confidence, alpha, correction, thresholds)
