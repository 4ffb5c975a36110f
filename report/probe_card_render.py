"""The judge card (``report.probe_card.Card``) as text and as JSON-ready data (pure:
strings and plain values; the command writes them)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from flask_eval.report.probe_types import Card, Effect, JudgeCard, JudgeOps, PeopleAgreement
from flask_eval.report.serial import plain
from flask_eval.report.textgrid import DEFAULT_WIDTH

HEADER = ("probe", "measure", "estimate [CI]", "p", "p adj", "", "items", "instances", "gate")
#: the right-aligned columns of :data:`HEADER`
RIGHT = (3, 4, 6, 7)
SIGNIFICANT = "*"
EXPLAIN = (
    "*: significant after the correction across the card's tests; items: the pairs "
    "behind an effect, instances: its independent units (the interval and p are over "
    "them); gate FAIL: significant and at least the threshold"
)


def _signed(value: float, digits: int = 3) -> str:
    return "-" if not math.isfinite(value) else f"{value:+.{digits}f}"


def _p(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _estimate(e: Effect) -> str:
    if not (math.isfinite(e.low) and math.isfinite(e.high)):
        return _signed(e.estimate)
    return f"{_signed(e.estimate)} [{_signed(e.low)}, {_signed(e.high)}]"


def _gate(e: Effect) -> str:
    if e.gate is None:
        return ""
    return f"FAIL {e.gate:g}" if e.fails else f"ok {e.gate:g}"


def cells(e: Effect) -> list[str]:
    """One effect's columns (:data:`HEADER`)."""
    return [
        e.probe,
        e.measure,
        _estimate(e),
        _p(e.p_value),
        _p(e.p_adjusted),
        SIGNIFICANT if e.significant else "",
        str(e.items),
        str(e.clusters),
        _gate(e),
    ]


def _grid(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    lines = []
    for row in rows:
        parts = [
            v.rjust(w) if k in RIGHT else v.ljust(w)
            for k, (v, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append(("  " + "  ".join(parts)).rstrip())
    return lines


def _share(part: int, whole: int) -> str:
    return "-" if whole <= 0 else f"{100 * part / whole:.1f}%"


def ops_line(ops: JudgeOps) -> str:
    """How the judge worked: its rows, the shares unreadable and refused, latency, cost."""
    latency = "-" if ops.latency_ms is None else f"{ops.latency_ms:.0f} ms"
    cost = "-" if ops.cost_per_judgment is None else f"${ops.cost_per_judgment:.4g}"
    return (
        f"ops: {ops.judgments} judgments; unparseable {_share(ops.unparseable, ops.judgments)}, "
        f"refused {_share(ops.refused, ops.judgments)}, failed {ops.failed}; "
        f"mean latency {latency}; cost per judgment {cost}"
    )


def _r(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}"


def people_line(people: PeopleAgreement) -> str:
    """The judge against the people's mean."""
    return (
        f"people: {people.items} items; Pearson {_r(people.pearson)}, Spearman "
        f"{_r(people.spearman)}, within one point {_r(people.within_one)}"
    )


def _judge(card: JudgeCard) -> list[str]:
    out = [f" {card.judge}:"]
    if card.effects:
        out += _grid([HEADER, *(cells(e) for e in card.effects)])
    else:
        out.append("  no probe measured")
    if card.consistency is not None:
        out.append(
            f"  consistency: {100 * card.consistency:.1f}% of the comparisons held their "
            "verdict when the order swapped"
        )
    if card.ops is not None:
        out.append("  " + ops_line(card.ops))
    if card.people is not None:
        out.append("  " + people_line(card.people))
    out += [f"  note: {n}" for n in card.notes]
    return out


def _settings(card: Card) -> str:
    gate = ", ".join(f"{k}={v:g}" for k, v in card.gate.items()) or "none"
    return (
        f"{card.confidence:.0%} intervals over instances; {card.correction} across every "
        f"test of the card, alpha {card.alpha:g}; gate: {gate}"
    )


def card_text(card: Card) -> str:
    """The card as text: the settings, one table per judge with its consistency, ops,
    people and notes, and the gate's failures."""
    out = [f"Judge card of {card.run}", _settings(card)]
    for judge in card.cards:
        out += ["", *_judge(judge)]
    out += ["", textwrap.fill(EXPLAIN, DEFAULT_WIDTH)]
    if card.gate:
        failed = card.failed
        if failed:
            out += ["", f"gate: {len(failed)} effect(s) failed:"]
            out += [
                f"  {e.judge} {e.probe}: {_signed(e.estimate)} reaches {e.gate:g} "
                f"(p adj {_p(e.p_adjusted)})"
                for e in failed
            ]
        else:
            out += ["", "gate: passed"]
    return "\n".join(out) + "\n"


def card_json(card: Card) -> dict[str, Any]:
    """Everything, JSON-ready (plain numbers, NaN as null)."""
    payload = {
        "run": card.run,
        "confidence": card.confidence,
        "alpha": card.alpha,
        "correction": card.correction,
        "gate": dict(card.gate),
        "judges": [
            {
                "judge": c.judge,
                "effects": [asdict(e) for e in c.effects],
                "consistency": c.consistency,
                "ops": None if c.ops is None else asdict(c.ops),
                "people": None if c.people is None else asdict(c.people),
                "notes": list(c.notes),
            }
            for c in card.cards
        ],
        "failed": [
            {"judge": e.judge, "probe": e.probe, "estimate": e.estimate, "gate": e.gate}
            for e in card.failed
        ],
    }
    result: dict[str, Any] = plain(payload)
    return result
