"""The pairwise figures as SVG: the win-rate matrix (:func:`win_matrix`), the ratings
(:func:`ratings_chart`) and position consistency per judge (:func:`position_chart`), drawn
with :mod:`report.svg_draw` (pure).

Import the figures from :mod:`report.svg`, the public interface of all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from flask_eval.report.pairwise import ALL_CRITERIA, WinRate
from flask_eval.report.pairwise_bias import Position
from flask_eval.report.pairwise_ratings import Rating
from flask_eval.report.pairwise_report import PairwiseReport
from flask_eval.report.svg_draw import (
    CHAR,
    RDYLGN,
    Colours,
    GridCell,
    PairCell,
    PairHref,
    grid,
    heading,
    mark,
    note,
    num,
    palette,
    reference_line,
    short,
    svg,
    text,
    value_axis,
    whisker,
)


def pair_colors(report: PairwiseReport) -> dict[str, str]:
    """The colour of each model of a pairwise report: best first by its mean rating over
    the judges (criteria pooled), as :func:`palette` gives them."""
    ratings: dict[str, list[float]] = {}
    for r in report.ratings:
        if r.criterion == ALL_CRITERIA and r.rating is not None:
            ratings.setdefault(r.model, []).append(r.rating)
    mean = {m: sum(v) / len(v) for m, v in ratings.items()}
    position = {m: i for i, m in enumerate(report.models)}
    ranked = sorted(report.models, key=lambda m: (m not in mean, -mean.get(m, 0.0), position[m]))
    return palette(ranked)


def _order(report: PairwiseReport, judge: str, criterion: str) -> list[str]:
    """The models best first under ``judge`` on ``criterion`` (unrated ones last)."""
    rated = [r.model for r in report.leaderboard(judge, criterion) if r.model in report.models]
    return list(dict.fromkeys([*rated, *report.models]))


def _pair_title(a: str, b: str, w: WinRate, flipped: bool) -> str:
    score, ci = (1 - w.score, w.score_ci) if flipped else (w.score, w.score_ci)
    if ci is not None and flipped:
        ci = (1 - ci[1], 1 - ci[0])
    win, loss = (w.loss, w.win) if flipped else (w.win, w.loss)
    interval = "" if ci is None else f", interval {ci[0]:.2f}–{ci[1]:.2f}"
    return (
        f"{a} vs {b}: score {score:.2f}{interval} (win {win:.2f}, tie {w.tie:.2f}, "
        f"loss {loss:.2f}), n {w.n} ({w.n_swapped} judged in both orders)"
    )


def win_matrix(
    report: PairwiseReport, judge: str, criterion: str = ALL_CRITERIA, href: PairHref | None = None
) -> str:
    """The row model's score against the column model (win + tie / 2) under ``judge`` on
    ``criterion``, models best first by their rating; each cell links to ``href``'s URL."""
    pairs: dict[tuple[str, str], tuple[WinRate, bool]] = {}
    for w in report.win_rates:
        if w.judge == judge and w.criterion == criterion:
            pairs[(w.model_a, w.model_b)], pairs[(w.model_b, w.model_a)] = (w, False), (w, True)
    models = _order(report, judge, criterion)
    what = "" if criterion == ALL_CRITERIA else f", {criterion}"
    label = f"Win rate (row vs column) — judge {judge}{what}"
    if not pairs:
        return note("winrate", label, f"{label}: no comparisons")

    def at(a: str, b: str) -> GridCell | None:
        if a == b:
            return None
        cell = PairCell(a, b, judge, criterion)
        data = {"model-a": a, "model-b": b, "judge": judge, "criterion": criterion}
        if (a, b) not in pairs:
            return GridCell(None, f"{a} vs {b}: no data (no comparisons)", data)
        w, flipped = pairs[(a, b)]
        url = href(cell) if href is not None else None
        return GridCell(
            1 - w.score if flipped else w.score, _pair_title(a, b, w, flipped), data, url
        )

    cells = [[at(a, b) for b in models] for a in models]
    return grid(
        "winrate", label, models, models, cells, Colours((0.0, 1.0), RDYLGN), pair_colors(report)
    )


def _rating_title(r: Rating) -> str:
    if r.rating is None:
        return f"{r.model}: no rating (no chain of games to the anchor {r.anchor})"
    ci = "" if r.ci is None else f", interval {r.ci[0]:.0f}–{r.ci[1]:.0f}"
    win = "" if r.win_rate is None else f", predicted win rate vs {r.anchor} {r.win_rate:.2f}"
    return f"{r.model}: rating {r.rating:.0f}{ci}{win}, n {r.games} games"


def ratings_chart(report: PairwiseReport, judge: str, criterion: str = ALL_CRITERIA) -> str:
    """Bradley-Terry ratings (Elo scale, the anchor at 1000) of ``judge`` on ``criterion``,
    best first, each with its bootstrap interval as a whisker and its predicted win rate
    against the anchor at the right."""
    board = report.leaderboard(judge, criterion)
    what = "" if criterion == ALL_CRITERIA else f", {criterion}"
    label = f"Ratings (Bradley-Terry, {report.anchor} = 1000) — judge {judge}{what}"
    values: list[float] = [r.rating for r in board if r.rating is not None]
    values += [v for r in board if r.ci is not None for v in r.ci]
    if not values:
        return note("ratings", label, f"{label}: no model is rated")
    lo, hi = min([*values, 1000.0]), max([*values, 1000.0])
    pad = max((hi - lo) * 0.05, 10.0)
    lo, hi = lo - pad, hi + pad
    left = 24 + CHAR * min(max(len(r.model) for r in board), 28)
    x0, x1, top, rh = left, left + 420, 50.0, 22.0
    bottom = top + rh * len(board)

    def x(v: float) -> float:
        return x0 + (x1 - x0) * (v - lo) / (hi - lo)

    colour = pair_colors(report)
    body = [
        heading((x0 + x1) / 2, label),
        text(x1 + 40, top - 6, "win rate", "middle", ' font-size="9" fill="#444"'),
    ]
    body += value_axis(x, lo, hi, top, bottom)
    body.append(reference_line("anchor", x(1000), top, bottom, "#888"))
    for i, r in enumerate(board):
        y = top + rh * (i + 0.5)
        body.append(text(x0 - 8, y + 4, short(r.model, 28), "end", full=r.model))
        data = {"model": r.model, "judge": judge, "criterion": criterion}
        if r.rating is None:
            attrs = f'cx="{num(x0 + 6)}" cy="{num(y)}" r="4" fill="none" stroke="#999"'
            body.append(mark("circle", attrs, _rating_title(r), None, data, missing=True))
            continue
        if r.ci is not None:
            body.append(whisker(x(r.ci[0]), x(r.ci[1]), y))
        attrs = f'cx="{num(x(r.rating))}" cy="{num(y)}" r="5" fill="{colour.get(r.model, "#555")}"'
        body.append(mark("circle", attrs, _rating_title(r), None, data))
        if r.win_rate is not None:
            body.append(text(x1 + 40, y + 4, f"{r.win_rate:.2f}", extra=' font-size="10"'))
    body.append(text((x0 + x1) / 2, bottom + 30, "rating", extra=' font-size="10"'))
    return svg("ratings", x1 + 80, bottom + 40, label, body)


def _position_title(p: Position) -> str:
    ci = p.consistency_ci
    interval = "" if ci is None else f", interval {ci[0]:.3f}–{ci[1]:.3f}"
    first = "" if p.first_preference is None else f"{p.first_preference:.3f}"
    return (
        f"{p.judge}: consistency {p.consistency:.3f}{interval}, n {p.n_swapped} judged in "
        f"both orders; first-position preference {first or 'no data'}, n {p.n_decisive}"
    )


def position_chart(positions: Sequence[Position]) -> str:
    """Position consistency of each judge (criteria pooled: the share of comparisons
    judged in both orders whose verdict survives the swap), 0 to 1, its bootstrap interval
    as a whisker; ``""`` when no judge has one."""
    rows = [p for p in positions if p.criterion == ALL_CRITERIA and p.consistency is not None]
    if not rows:
        return ""
    label = "Position consistency per judge"
    x0, y0, y1 = 50.0, 40.0, 240.0
    group = max(60.0, min(120.0, 600 / len(rows)))
    x1 = x0 + group * len(rows)

    def y(v: float) -> float:
        return y1 - (y1 - y0) * min(max(v, 0.0), 1.0)

    turn = f' transform="rotate(-90 14 {num((y0 + y1) / 2)})"'
    body = [
        heading((x0 + x1) / 2, label),
        f'<rect x="{num(x0)}" y="{num(y0)}" width="{num(x1 - x0)}" height="{num(y1 - y0)}" '
        'fill="none" stroke="#bbb"/>',
        text(14, (y0 + y1) / 2, "position consistency", extra=turn),
    ]
    for k in range(6):
        t = k / 5
        body += [
            f'<line x1="{num(x0)}" x2="{num(x1)}" y1="{num(y(t))}" y2="{num(y(t))}" '
            'stroke="#000" stroke-opacity="0.1"/>',
            text(x0 - 4, y(t) + 3, f"{t:g}", "end", ' font-size="9" fill="#444"'),
        ]
    width = 0.6 * group
    for i, p in enumerate(rows):
        value = p.consistency or 0.0
        centre = x0 + group * (i + 0.5)
        body.append(text(centre, y1 + 16, short(p.judge, int(group / CHAR)), full=p.judge))
        attrs = (
            f'x="{num(centre - width / 2)}" y="{num(y(value))}" width="{num(width)}" '
            f'height="{num(y1 - y(value))}" fill="#4878d0"'
        )
        data = {"judge": p.judge, "criterion": p.criterion}
        body.append(mark("rect", attrs, _position_title(p), None, data))
        if p.consistency_ci is not None:
            a, b = y(p.consistency_ci[0]), y(p.consistency_ci[1])
            body.append(
                f'<path class="whisker" d="M{num(centre)},{num(a)}V{num(b)}'
                f'M{num(centre - 3)},{num(a)}h6M{num(centre - 3)},{num(b)}h6" '
                'stroke="#333" stroke-width="0.8" fill="none"/>'
            )
    return svg("position", x1 + 20, y1 + 30, label, body)
