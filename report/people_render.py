"""The People section drawn: as text lines (``report.text``) and as an HTML section
(``report.html``); pure, strings only. JSON is :meth:`PeopleReport.as_dict`.

Each table says what it compares; intervals are the section's bootstrap intervals
(:mod:`report.people`). In HTML, each disagreement links to the item's judgments when
the caller gives a link for an item (``item_href``: the viewer's judgments page)."""

from __future__ import annotations

import html
import textwrap
from collections.abc import Callable, Sequence

from flask_eval.report.people_data import (
    ABSOLUTE,
    Disagreement,
    Interval,
    Item,
    JudgeVersusPeople,
    PeopleMean,
    PeopleReport,
    RaterAgreement,
    VerdictAgreement,
    verdict_text,
)
from flask_eval.report.people_stats import INTERVAL, NOMINAL, ORDINAL
from flask_eval.report.textgrid import DEFAULT_WIDTH, clip, fmt, fmt_interval

#: the link of an item's judgments (None: no link)
ItemHref = Callable[[Item], str | None]

VERSUS_NOTE = (
    "each judge's score (the mean of its samples) against the people's mean score on the "
    "items both scored: Pearson's r, Spearman's rho and Kendall's tau-b with their "
    "intervals (instances resampled), and the share of items within 1 point"
)
VERDICT_NOTE = (
    "how often each judge's verdict is the people's majority verdict: on every item both "
    "gave one, and without ties (items where either says tie left out)"
)


def _ci(interval: Interval, digits: int = 2) -> str:
    return fmt_interval(*interval, digits) if interval is not None else ""


def _group(dimension: str, key: str) -> str:
    return key if dimension == "overall" else f"{dimension} {key}"


def headline(people: PeopleReport) -> str:
    """Who rated how much: the section's first line."""
    names = ", ".join(r.split("/", 1)[-1] for r in people.raters)
    return (
        f"{len(people.raters)} rater{'s' if len(people.raters) != 1 else ''} ({names}): "
        f"{people.items:,} items rated, {people.items_multi:,} of them by two raters or more, "
        f"{people.ratings:,} ratings"
    )


# -- text ----------------------------------------------------------------------------------


def text(people: PeopleReport, level: int) -> list[str]:
    """The section as text lines."""
    lines = ["People", *textwrap.wrap(headline(people), DEFAULT_WIDTH, subsequent_indent="  ")]
    if people.means:
        lines += ["", "People's mean score (an item's score: the mean of its raters')"]
        lines += _means_text(people.means, level)
    lines += ["", f"Agreement among people: Krippendorff's alpha with its {level}% CI"]
    lines += _alpha_text(people.agreement)
    if people.kind == ABSOLUTE and people.versus:
        lines += ["", *textwrap.wrap(f"Judges versus people: {VERSUS_NOTE}", DEFAULT_WIDTH)]
        lines += _versus_text(people.versus)
    if people.verdicts:
        lines += ["", *textwrap.wrap(f"Judges versus people: {VERDICT_NOTE}", DEFAULT_WIDTH)]
        lines += _verdicts_text(people.verdicts)
    if people.disagreements:
        what = (
            "a judge more than 1 point from the people's mean"
            if people.kind == ABSOLUTE
            else "a judge's verdict that is not the people's majority"
        )
        lines += ["", f"Largest disagreements ({what})"]
        lines += _disagreements_text(people.disagreements, people.kind)
    for note in people.notes:
        lines += textwrap.wrap(note, DEFAULT_WIDTH, initial_indent="  - ", subsequent_indent="    ")
    return [line.rstrip() for line in lines]


def _means_text(rows: Sequence[PeopleMean], level: int) -> list[str]:
    keys = [_group(m.dimension, m.key) for m in rows]
    w = min(max([5, *(len(k) for k in keys)]), 36)
    out = [f"  {'':<{w}}  {'mean':>6}  {f'{level}% CI':<14}  {'items':>6}  {'ratings':>7}"]
    for key, m in zip(keys, rows, strict=True):
        out.append(
            f"  {clip(key, w):<{w}}  {fmt(m.mean):>6}  {_ci(m.ci):<14}  {m.items:>6}  "
            f"{m.ratings:>7}"
        )
    return out


def _alpha_text(rows: Sequence[RaterAgreement]) -> list[str]:
    metrics = [m for m in (ORDINAL, INTERVAL, NOMINAL) if any(r.metric == m for r in rows)]
    criteria = list(dict.fromkeys(r.criterion for r in rows))
    of = {(r.criterion, r.metric): r for r in rows}
    w = min(max([9, *(len(c) for c in criteria)]), 24)
    head = f"  {'criterion':<{w}}" + "".join(f"  {m:>8}  {'CI':<16}" for m in metrics)
    out = [head + f"  {'items':>6}  {'ratings':>7}"]
    for criterion in criteria:
        cells = "".join(
            f"  {fmt(of[(criterion, m)].alpha, 3):>8}  {_ci(of[(criterion, m)].ci, 3):<16}"
            for m in metrics
        )
        first = of[(criterion, metrics[0])]
        out.append(f"  {clip(criterion, w):<{w}}{cells}  {first.items:>6}  {first.ratings:>7}")
    return out


def _by_judge(rows: Sequence[JudgeVersusPeople] | Sequence[VerdictAgreement]) -> list[str]:
    return list(dict.fromkeys(r.judge for r in rows))


def _versus_text(rows: Sequence[JudgeVersusPeople]) -> list[str]:
    """Per judge, one line per group (n, each correlation, within 1), its intervals on
    the line under it."""
    wk = min(max([5, *(len(_group(r.dimension, r.key)) for r in rows)]), 30)
    head = (
        f"    {'':<{wk}}  {'n':>5}  {'Pearson':<14}  {'Spearman':<14}  {'Kendall tau-b':<14}"
        f"  {'within 1':>8}"
    )
    out = []
    for judge in _by_judge(rows):
        out += [f"  {judge}", head]
        for r in rows:
            if r.judge != judge:
                continue
            pairs = (
                (r.pearson, r.pearson_ci),
                (r.spearman, r.spearman_ci),
                (r.kendall_tau_b, r.kendall_ci),
            )
            values = "  ".join(f"{fmt(v, 3):<14}" for v, _ in pairs)
            key = clip(_group(r.dimension, r.key), wk)
            out.append(f"    {key:<{wk}}  {r.n:>5}  {values}  {fmt(r.within1, 3):>8}")
            intervals = "  ".join(f"{_ci(ci):<14}" for _, ci in pairs)
            if intervals.strip():
                out.append(f"    {'':<{wk}}  {'':>5}  {intervals}")
    return out


def _verdicts_text(rows: Sequence[VerdictAgreement]) -> list[str]:
    """Per judge, one line per group: agreement with ties and without, intervals."""
    wk = min(max([5, *(len(_group(r.dimension, r.key)) for r in rows)]), 28)
    head = f"    {'':<{wk}}  {'n':>5}  {'agreement':<17}  {'n w/o ties':>10}  without ties"
    out = []
    for judge in _by_judge(rows):
        out += [f"  {judge}", head]
        for r in rows:
            if r.judge != judge:
                continue
            key = clip(_group(r.dimension, r.key), wk)
            out.append(
                f"    {key:<{wk}}  {r.n:>5}  {f'{fmt(r.agreement)} {_ci(r.agreement_ci)}':<17}  "
                f"{r.n_decisive:>10}  {fmt(r.agreement_decisive)} {_ci(r.decisive_ci)}"
            )
    return out


def _values(d: Disagreement, kind: str) -> tuple[str, str]:
    if kind == ABSOLUTE:
        return fmt(d.judge_value), fmt(d.people_value)
    return verdict_text(d.item, d.judge_value), verdict_text(d.item, d.people_value)


def _item_text(item: Item) -> str:
    pair = f"{item.model} vs {item.model_b}" if item.model_b else item.model
    return f"{pair}, instance {item.instance}, {item.criterion}"


def _disagreements_text(rows: Sequence[Disagreement], kind: str) -> list[str]:
    out = []
    for d in rows:
        judged, rated = _values(d, kind)
        line = (
            f"{d.judge}: {judged}, people: {rated} ({d.ratings} rating"
            f"{'s' if d.ratings != 1 else ''}); {_item_text(d.item)}"
        )
        out += textwrap.wrap(line, DEFAULT_WIDTH, initial_indent="  ", subsequent_indent="      ")
    return out


# -- HTML ----------------------------------------------------------------------------------


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def html_table(
    heads: Sequence[str], keys: int, rows: Sequence[Sequence[str]], ident: str, css: str = ""
) -> str:
    """A table of the HTML report: ``heads``, the first ``keys`` columns left-aligned;
    cells are HTML (the caller escapes what they hold); ``css`` its class, if any."""
    cls = [" class='key'" if n < keys else "" for n in range(len(heads))]
    shown = f" class='{_e(css)}'" if css else ""
    out = [f"<table id='{_e(ident)}'{shown}><tr>"]
    out += [f"<th{c}>{_e(h)}</th>" for c, h in zip(cls, heads, strict=True)]
    out.append("</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td{c}>{v}</td>" for c, v in zip(cls, row, strict=True)))
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _stat(value: float | None, ci: Interval, digits: int = 3) -> str:
    interval = _ci(ci)
    span = f" <span class='ci'>{_e(interval)}</span>" if interval else ""
    return f"{fmt(value, digits)}{span}"


def html_section(people: PeopleReport, level: int, item_href: ItemHref | None = None) -> str:
    """The section's HTML (inside its ``<section>``)."""
    parts = [f"<p class='meta'>{_e(headline(people))}.</p>"]
    if people.means:
        rows = [
            [_e(_group(m.dimension, m.key)), _stat(m.mean, m.ci, 2), str(m.items), str(m.ratings)]
            for m in people.means
        ]
        parts.append("<h3>People's mean score</h3>")
        parts.append(html_table(("", "mean", "items", "ratings"), 1, rows, "people-means"))
        parts.append("<p class='note'>An item's score is the mean of its raters' scores.</p>")
    metrics = list(dict.fromkeys(a.metric for a in people.agreement))
    of = {(a.criterion, a.metric): a for a in people.agreement}
    criteria = list(dict.fromkeys(a.criterion for a in people.agreement))
    rows = [
        [
            _e(c),
            *(_stat(of[(c, m)].alpha, of[(c, m)].ci) for m in metrics),
            str(of[(c, metrics[0])].items),
            str(of[(c, metrics[0])].ratings),
        ]
        for c in criteria
    ]
    heads = ("criterion", *(f"α {m}" for m in metrics), "items", "ratings")
    parts.append(f"<h3>Agreement among people (Krippendorff's α, {level}% CI)</h3>")
    parts.append(html_table(heads, 1, rows, "people-alpha"))
    parts.append("<p class='note'>Items rated by two raters or more; missing ratings allowed.</p>")
    if people.versus:
        rows = [
            [
                _e(v.judge),
                _e(_group(v.dimension, v.key)),
                str(v.n),
                _stat(v.pearson, v.pearson_ci),
                _stat(v.spearman, v.spearman_ci),
                _stat(v.kendall_tau_b, v.kendall_ci),
                _stat(v.within1, v.within1_ci),
            ]
            for v in people.versus
        ]
        heads = ("judge", "items", "n", "Pearson", "Spearman", "Kendall τ-b", "within 1")
        parts.append("<h3>Judges versus people</h3>")
        parts.append(html_table(heads, 2, rows, "people-versus"))
        parts.append(f"<p class='note'>{_e(VERSUS_NOTE[0].upper() + VERSUS_NOTE[1:])}.</p>")
    if people.verdicts:
        rows = [
            [
                _e(v.judge),
                _e(_group(v.dimension, v.key)),
                str(v.n),
                _stat(v.agreement, v.agreement_ci),
                str(v.n_decisive),
                _stat(v.agreement_decisive, v.decisive_ci),
            ]
            for v in people.verdicts
        ]
        heads = ("judge", "items", "n", "agreement", "n without ties", "without ties")
        parts.append("<h3>Judges versus people</h3>")
        parts.append(html_table(heads, 2, rows, "people-verdicts"))
        parts.append(f"<p class='note'>{_e(VERDICT_NOTE[0].upper() + VERDICT_NOTE[1:])}.</p>")
    if people.disagreements:
        parts.append("<h3>Largest disagreements</h3>")
        parts.append(_disagreements_html(people, item_href))
    parts += [f"<p class='note'>{_e(n)}</p>" for n in people.notes]
    return "".join(parts)


def _disagreements_html(people: PeopleReport, item_href: ItemHref | None) -> str:
    rows = []
    for d in people.disagreements:
        judged, rated = _values(d, people.kind)
        shown = _e(_item_text(d.item))
        url = item_href(d.item) if item_href is not None else None
        link = f"<a href='{_e(url)}'>{shown}</a>" if url else shown
        rows.append([_e(d.judge), link, _e(judged), _e(rated), str(d.ratings)])
    heads = ("judge", "item", "judge's", "people's", "ratings")
    return html_table(heads, 2, rows, "people-disagreements")
