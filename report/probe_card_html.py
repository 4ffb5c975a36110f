"""A judge card drawn as HTML (pure, strings only): per judge a table of the probes'
effects, a forest plot of them (:func:`report.svg.forest`), its consistency, how it
worked (ops) and its agreement with people (:func:`card_html`); and the pairs of items
behind one effect (:func:`pairs_html`). The HTML report embeds the card, the viewer serves
both, every effect linking to its pairs and every pair to its judgments.

Every name (run, judge, model, instance, criterion, note) is escaped; links come from the
caller (``pairs_href``, ``item_href``) and are dropped when their scheme could run code.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence

from flask_eval.core.probes import EXPANDS, SELF, SWAP, VARIANTS, twin_name
from flask_eval.report.people_render import html_table
from flask_eval.report.probe_types import (
    Card,
    CardInputs,
    Effect,
    JudgeCard,
    JudgeOps,
    OrderedVerdicts,
    PeopleAgreement,
    TwinScore,
)
from flask_eval.report.svg import ForestRow, forest
from flask_eval.report.svg_draw import safe_url
from flask_eval.report.textgrid import fmt, fmt_interval

#: the link of an effect's pairs: (judge, pairs key) -> URL
PairsHref = Callable[[str, str], str]
#: the link of an item's judgments, from keywords (model, instance, criterion, judge, and
#: for a comparison model_b and pair="either")
ItemHref = Callable[..., str]

#: the keys whose pairs :func:`pairs_html` lists: each variant, ``length`` and ``inject``
#: (their variants together), the order swap and self-preference
PAIR_KEYS = (*VARIANTS, *(k for k, v in EXPANDS.items() if len(v) > 1), SWAP, SELF)
EFFECT_HEADS = (
    "probe",
    "measure",
    "estimate",
    "interval",
    "p",
    "significant",
    "items",
    "instances",
    "gate",
)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _link(url: str | None, shown: str, cls: str = "") -> str:
    """``shown`` (HTML) in a link to ``url`` when it is one that runs no code."""
    url = safe_url(url)
    css = f" class='{_e(cls)}'" if cls else ""
    return f"<a{css} href='{_e(url)}'>{shown}</a>" if url else shown


def _p(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "–"


def _gate(e: Effect) -> str:
    if e.gate is None:
        return "–"
    word = "fails" if e.fails else "passes"
    return f"<span class='{'neg' if e.fails else 'pos'}'>{word} (gate {fmt(e.gate, 3)})</span>"


def _effect_row(e: Effect, judge: str, pairs_href: PairsHref | None) -> list[str]:
    key = e.pairs_key[1]
    url = pairs_href(judge, key) if pairs_href is not None and key else None
    return [
        _link(url, _e(e.probe), "pairs"),
        _e(e.measure),
        fmt(e.estimate, 3),
        f"<span class='ci'>{_e(fmt_interval(e.low, e.high, 3))}</span>",
        _e(_p(e.p_value)),
        "yes" if e.significant else "no",
        str(e.items),
        str(e.clusters),
        _gate(e),
    ]


def _forest(card: JudgeCard, level: int, pairs_href: PairsHref | None) -> str:
    rows = []
    for e in card.effects:
        key = e.pairs_key[1]
        interval = fmt_interval(e.low, e.high, 3)
        title = (
            f"{e.probe} — {e.measure}: {e.estimate:.3f}, {level}% interval {interval}, "
            f"p {_p(e.p_value)}, {e.items} items in {e.clusters} instances"
        )
        rows.append(
            ForestRow(
                label=f"{e.probe} ({e.measure})",
                estimate=e.estimate,
                low=e.low,
                high=e.high,
                title=title,
                url=pairs_href(card.judge, key) if pairs_href is not None and key else None,
                data={"judge": card.judge, "probe": e.probe, "key": key},
                significant=e.significant,
                fails=e.fails,
            )
        )
    label = f"Probe effects — judge {card.judge} ({level}% intervals)"
    drawn = forest(rows, label)
    return f"<div class='figures'><figure class='svg' data-figure='forest'>{drawn}</figure></div>"


def _ops(ops: JudgeOps, ident: str) -> str:
    latency = "–" if ops.latency_ms is None else f"{ops.latency_ms:,.0f} ms"
    cost = "–" if ops.cost_per_judgment is None else f"${ops.cost_per_judgment:.5f}"
    row = [
        str(ops.judgments),
        _share(ops.unparseable, ops.judgments),
        _share(ops.refused, ops.judgments),
        str(ops.failed),
        _e(latency),
        _e(cost),
    ]
    heads = ("judgments", "unparseable", "refused", "failed", "mean latency", "cost / judgment")
    return html_table(heads, 0, [row], ident, "grid card-ops")


def _people(people: PeopleAgreement, ident: str) -> str:
    row = [str(people.items), *(fmt(v, 3) for v in (people.pearson, people.spearman))]
    row.append(fmt(people.within_one, 3))
    heads = ("items", "Pearson", "Spearman", "within 1")
    return html_table(heads, 0, [row], ident, "grid card-people")


def _judge_section(n: int, card: JudgeCard, level: int, pairs_href: PairsHref | None) -> str:
    parts = [f"<section class='judge-card' id='card-{n}' data-judge='{_e(card.judge)}'>"]
    parts.append(f"<h3>Judge {_e(card.judge)}</h3>")
    if card.effects:
        parts.append(_forest(card, level, pairs_href))
        rows = [_effect_row(e, card.judge, pairs_href) for e in card.effects]
        parts.append(html_table(EFFECT_HEADS, 2, rows, f"card-{n}-effects", "grid card-effects"))
    else:
        parts.append("<p class='note'>No probe effect could be measured.</p>")
    if card.consistency is not None:
        parts.append(
            f"<p class='consistency'>Order consistency: {fmt(card.consistency, 3)} "
            "<span class='note'>(the share of comparisons whose verdict held when the order "
            "swapped)</span></p>"
        )
    if card.ops is not None:
        parts += ["<h4>How it worked</h4>", _ops(card.ops, f"card-{n}-ops")]
    if card.people is not None:
        parts += ["<h4>Agreement with people</h4>", _people(card.people, f"card-{n}-people")]
    parts += [f"<p class='note'>{_e(note)}</p>" for note in card.notes]
    parts.append("</section>")
    return "".join(parts)


def card_html(card: Card, *, pairs_href: PairsHref | None = None) -> str:
    """The card of every judge of ``card`` as an HTML fragment; each effect (its table row
    and its dot in the forest plot) links to ``pairs_href(judge, key)`` when given."""
    level = round(100 * card.confidence)
    gate = ", ".join(f"{k} {fmt(v, 3)}" for k, v in card.gate.items())
    failed = len(card.failed)
    parts = [
        f"<div class='judge-cards' data-run='{_e(card.run)}'>",
        f"<p class='meta'>{level}% intervals; significant at α {fmt(card.alpha, 3)} after "
        f"{_e(card.correction)} correction across every effect of the card"
        + (f"; gate: {_e(gate)}" if gate else "")
        + ".</p>",
    ]
    if card.gate:
        verdict = f"{failed} effect{'s' if failed != 1 else ''} failed the gate"
        parts.append(f"<p class='gate {'neg' if failed else 'pos'}'>{_e(verdict)}.</p>")
    if not card.cards:
        parts.append("<p class='note'>No judge to show.</p>")
    parts += [_judge_section(n, c, level, pairs_href) for n, c in enumerate(card.cards)]
    parts.append("</div>")
    return "".join(parts)


# -- the pairs behind an effect ---------------------------------------------------------


def pair_variants(key: str) -> tuple[str, ...]:
    """The twin variants whose pairs ``key`` stands for (``""``: the original responses
    judged in both orders; none for self-preference); ValueError for an unknown key."""
    if key in VARIANTS:
        return (key,)
    if key == SWAP:
        return ("",)
    if key == SELF:
        return ()
    if key in PAIR_KEYS:
        return EXPANDS[key]
    raise ValueError(f"no pairs are called {key!r}; choose from: {', '.join(PAIR_KEYS)}")


def _twins(rows: Sequence[TwinScore], judge: str, item_href: ItemHref) -> str:
    ordered = sorted(rows, key=lambda t: (-abs(t.twin - t.original), t.model, t.instance))
    out = []
    for t in ordered:
        params = {"instance": t.instance, "criterion": t.criterion, "judge": judge}
        original = _link(item_href(model=t.model, **params), "original", "item original")
        twin = _link(item_href(model=twin_name(t.model, t.variant), **params), "twin", "item twin")
        out.append(
            [
                _e(t.model),
                _e(t.variant),
                _e(t.instance),
                _e(t.criterion),
                fmt(t.original),
                fmt(t.twin),
                f"{t.twin - t.original:+.2f}",
                str(t.words_original),
                str(t.words_twin),
                f"{original} · {twin}",
            ]
        )
    heads = (
        "model",
        "variant",
        "instance",
        "criterion",
        "original",
        "twin",
        "difference",
        "words (original)",
        "words (twin)",
        "judgments",
    )
    return html_table(heads, 4, out, "card-pairs", "grid card-pairs")


def _verdict(value: float | None) -> str:
    if value is None:
        return "–"
    return "A won" if value == 1 else "B won" if value == 0 else "tie"


def _swaps(rows: Sequence[OrderedVerdicts], judge: str, item_href: ItemHref) -> str:
    out = []
    for v in sorted(rows, key=lambda v: (v.model_a, v.model_b, v.instance, v.criterion)):
        a = twin_name(v.model_a, v.variant) if v.variant else v.model_a
        held = "–" if v.a_first is None or v.a_second is None else _held(v.a_first, v.a_second)
        url = item_href(
            model=a,
            model_b=v.model_b,
            pair="either",
            instance=v.instance,
            criterion=v.criterion,
            judge=judge,
        )
        out.append(
            [
                _link(url, f"{_e(a)} vs {_e(v.model_b)}", "item comparison"),
                _e(v.instance),
                _e(v.criterion),
                _verdict(v.a_first),
                _verdict(v.a_second),
                held,
            ]
        )
    heads = ("comparison (A vs B)", "instance", "criterion", "A shown first", "A shown second")
    return html_table((*heads, "held"), 3, out, "card-swaps", "grid card-pairs")


def _held(first: float, second: float) -> str:
    return "yes" if first == second else "no"


def _own(inputs: CardInputs, judge: str, item_href: ItemHref) -> str:
    others = [j for j in inputs.judges if j != judge]
    out = []
    for o in inputs.own:
        if judge not in o.scores:
            continue
        url = item_href(model=o.model, instance=o.instance, criterion=o.criterion, judge=judge)
        out.append(
            [
                _link(url, _e(o.model), "item"),
                _e(inputs.families.get(o.model, "–")),
                _e(o.instance),
                _e(o.criterion),
                fmt(o.scores[judge]),
                *(fmt(o.scores.get(j)) for j in others),
            ]
        )
    heads = ("model", "family", "instance", "criterion", judge, *others)
    return html_table(heads, 4, out, "card-pairs", "grid card-pairs")


def pairs_html(inputs: CardInputs, judge: str, key: str, *, item_href: ItemHref) -> str:
    """The pairs behind ``judge``'s effect of ``key`` (:data:`PAIR_KEYS`) as an HTML
    fragment, each linking to its judgments (``item_href``): for twins the original's and
    the twin's scores, largest difference first; for the order swap both orders' verdicts;
    for self-preference every judge's score of each response. ValueError for a judge
    or key the inputs do not know."""
    if judge not in inputs.judges:
        raise ValueError(f"run {inputs.run} has no judge {judge!r}")
    variants = pair_variants(key)
    head = f"<p class='meta'>Judge {_e(judge)}, {_e(key)}: "
    if key == SELF:
        count = sum(1 for o in inputs.own if judge in o.scores)
        return f"{head}{count} responses.</p>" + _own(inputs, judge, item_href)
    twins = [t for t in inputs.twins if t.judge == judge and t.variant in variants]
    verdicts = [v for v in inputs.verdicts if v.judge == judge and v.variant in variants]
    parts = []
    if twins or not verdicts:
        parts.append(f"{head}{len(twins)} items scored as the original and as its twin.</p>")
        parts.append(_twins(twins, judge, item_href))
    if verdicts:
        parts.append(f"{head}{len(verdicts)} comparisons judged in both orders.</p>")
        parts.append(_swaps(verdicts, judge, item_href))
    return "".join(parts)
