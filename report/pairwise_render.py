"""The pairwise part of a report as text, CSV and HTML (pure: strings).

Per judge: a leaderboard (Bradley-Terry rating, interval, predicted win rate against the
anchor, games), the win-rate matrix (row model's score against the column model: win +
tie / 2) and position consistency with the first-position preference. The HTML page adds
the figures of :mod:`report.figures` (the matrix as a heatmap, the ratings, position
consistency per judge).
"""

from __future__ import annotations

import html

from flask_eval.report.pairwise import ALL_CRITERIA
from flask_eval.report.pairwise_labels import ALL_GROUPS, Tally
from flask_eval.report.pairwise_report import PAIRWISE_FIELDS, PairwiseReport
from flask_eval.report.pairwise_tally import PairScore
from flask_eval.report.serial import csv_text
from flask_eval.report.textgrid import grid

#: per-group accuracy is shown in the text when there are at most this many groups
MAX_GROUPS_SHOWN = 12


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(interval: tuple[float, float] | None, digits: int = 2) -> str:
    return "" if interval is None else f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def _tally(tally: Tally) -> str:
    return f"{_f(tally.accuracy, 3)} ({tally.correct}/{tally.n})"


def _accuracy_lines(pw: PairwiseReport) -> list[str]:
    """Each judge's accuracy against the labels: with tie labels and without, and per
    group of instances when there are few groups."""
    groups = {a.group for a in pw.label_accuracy} - {ALL_GROUPS}
    shown = len(groups) <= MAX_GROUPS_SHOWN
    rows: list[tuple[str, Tally, Tally, str]] = []
    for acc in pw.label_accuracy:
        if acc.group == ALL_GROUPS:
            rows.append((acc.judge, acc.both, acc.listed, str(acc.n_one_order)))
            rows.append(("  without tie labels", acc.both_no_tie, acc.listed_no_tie, ""))
        elif shown:
            rows.append((f"  {acc.group}", acc.both, acc.listed, str(acc.n_one_order)))
    width = max(len("judge"), *(len(name) for name, *_ in rows))
    lines = [
        "Accuracy against the labels (Auto-J's rule: right when both orders are; one "
        "order: the order as listed)",
        f"  {'judge':<{width}}  {'both orders':<18}  {'one order':<18}  judged in one order only",
    ]
    for name, both, listed, single in rows:
        lines.append(f"  {name:<{width}}  {_tally(both):<18}  {_tally(listed):<18}  {single}")
    if groups and not shown:
        lines.append(f"  (per group, {len(groups)} groups: in the JSON report)")
    return [line.rstrip() for line in lines]


def _matrix_lines(pw: PairwiseReport, judge: str) -> list[str]:
    matrix = pw.matrix(judge)
    rows = [("", "", [(m, m) for m in pw.models])]
    return [
        f"Win-rate matrix | judge {judge} (row's score vs column: win + tie/2)",
        *grid(rows, [[m] for m in pw.models], lambda c, _dim, a: _f(matrix.get((a, pw.models[c])))),
    ]


_Column = tuple[bool, str]  # (a category, the key)


def _breakdown(
    pw: PairwiseReport, judge: str
) -> tuple[list[_Column], dict[tuple[_Column, str], str]]:
    """The columns of ``judge``'s breakdowns (every turn, each turn, each category) and
    (column, model) -> the model's score there (win + tie/2), with its games."""
    mine: list[PairScore] = [p for p in pw.breakdowns if p.judge == judge]
    columns = list(dict.fromkeys((p.category is not None, p.key) for p in mine))
    cells = {
        ((p.category is not None, p.key), p.model): f"{_f(p.win_rate_adjusted, 3)} ({p.matches})"
        for p in mine
    }
    return columns, cells


def _column_title(column: _Column) -> str:
    category, key = column
    return key if category else "all turns" if key == "all" else f"turn {key}"


def _breakdown_lines(pw: PairwiseReport, judge: str) -> list[str]:
    columns, cells = _breakdown(pw, judge)
    if not columns:
        return []
    rows = [("", "", [(m, m) for m in pw.models])]
    heads = [[_column_title(k)] for k in columns]
    return [
        f"By turn and category | judge {judge} (score vs every other model: win + tie/2, "
        "and games)",
        *grid(rows, heads, lambda c, _dim, m: cells.get((columns[c], m), "-"), least=11),
    ]


def _breakdown_html(pw: PairwiseReport, judge: str) -> str:
    columns, cells = _breakdown(pw, judge)
    if not columns:
        return ""
    heads = "".join(f"<th>{_e(_column_title(k))}</th>" for k in columns)
    out = [
        f"<h3>By turn and category, judge {_e(judge)}</h3><p class='note'>Each model's "
        "score against every other model (win + tie/2), and its games.</p><table "
        f"class='breakdown'><tr><th class='key'>model</th>{heads}</tr>"
    ]
    for m in pw.models:
        row = "".join(f"<td>{_e(cells.get((k, m), '-'))}</td>" for k in columns)
        out.append(f"<tr><td class='key'>{_e(m)}</td>{row}</tr>")
    out.append("</table>")
    return "".join(out)


def _controlled_lines(pw: PairwiseReport, judge: str, width: int, level: int) -> list[str]:
    """Length-controlled win rate (AlpacaEval 2) and style-controlled rating (Arena-Hard)
    of each model, best style-controlled rating first."""
    rows = pw.controlled_board(judge)
    if not rows:
        return []
    lines = [
        f"Controlled for length and style | judge {judge} ({level}% CI; criteria pooled)",
        f"  {'model':<{width}}  {'win vs anchor':>13}  {'LC win':>6}  {'interval':<14}  "
        f"{'style rating':>12}  {'interval':<18}  {'style win':>9}",
    ]
    for c in rows:
        lines.append(
            f"  {c.model:<{width}}  {_f(c.raw_win, 3):>13}  {_f(c.lc_win, 3):>6}  "
            f"{_ci(c.lc_ci, 3):<14}  {_f(c.style_rating, 1):>12}  {_ci(c.style_ci, 1):<18}  "
            f"{_f(c.style_win, 3):>9}".rstrip()
        )
    return lines


def text(pw: PairwiseReport, level: int = 95) -> str:
    """Leaderboard, win-rate matrix and position bias per judge, accuracy against the
    labels, the comparisons judged in one order only, as plain text."""
    lines = [f"Pairwise: {len(pw.models)} models, anchor {pw.anchor} (rating 1000)"]
    width = max([5, *(len(m) for m in pw.models)])
    for judge in pw.judges:
        lines += ["", f"Leaderboard | judge {judge} (Bradley-Terry, {level}% CI)"]
        lines.append(
            f"  {'model':<{width}}  {'rating':>7}  {'interval':<18}  "
            f"{'win vs anchor':>13}  {'games':>6}"
        )
        for r in pw.leaderboard(judge):
            lines.append(
                f"  {r.model:<{width}}  {_f(r.rating, 1):>7}  {_ci(r.ci, 1):<18}  "
                f"{_f(r.win_rate, 3):>13}  {r.games:>6}"
            )
        lines += _controlled_lines(pw, judge, width, level)
        lines += _matrix_lines(pw, judge)
        lines += _breakdown_lines(pw, judge)
    lines += [
        "",
        "Position bias (consistency: the verdict survives the swap; first: the share of non-tie",
        "verdicts that picked the response shown first)",
    ]
    for p in pw.positions:
        crit = "" if p.criterion == ALL_CRITERIA else f" [{p.criterion}]"
        lines.append(
            f"  {p.judge}{crit}: consistency {_f(p.consistency, 3)} "
            f"{_ci(p.consistency_ci, 3)} (n={p.n_swapped}); first {_f(p.first_preference, 3)} "
            f"{_ci(p.first_preference_ci, 3)} (n={p.n_decisive})"
        )
    if pw.label_accuracy:
        lines += ["", *_accuracy_lines(pw)]
    if pw.one_order:
        lines += ["", "Judged in one order only (left out of the rates and ratings above)"]
        for w in pw.one_order:
            if w.criterion == ALL_CRITERIA:
                rates = f"win {_f(w.win, 3)}, tie {_f(w.tie, 3)}, loss {_f(w.loss, 3)}"
                lines.append(f"  {w.judge}: {w.model_a} vs {w.model_b}: n={w.n}, {rates}")
    if pw.agreement:
        lines += ["", "Agreement between judges (combined verdicts: A, tie, B)"]
    for agree in pw.agreement:
        lines.append(
            f"  judges {agree.judge_a} and {agree.judge_b}: "
            + ", ".join(
                f"{k} {_f(v, 3) if isinstance(v, float) else v}"
                for k, v in vars(agree).items()
                if k not in ("judge_a", "judge_b")
            )
        )
    return "\n".join(lines) + "\n"


def csv(pw: PairwiseReport) -> str:
    """The pairwise rows as CSV (:data:`PAIRWISE_FIELDS`)."""
    return csv_text(PAIRWISE_FIELDS, pw.rows())


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def html_section(pw: PairwiseReport, figures: str = "") -> str:
    """The pairwise section of the HTML page (tables; ``figures`` is inserted first)."""
    out = [figures, f"<p class='meta'>Anchor: {_e(pw.anchor)} (rating 1000).</p>"]
    for judge in pw.judges:
        out.append(
            f"<h3>Leaderboard, judge {_e(judge)}</h3><table class='leaderboard'><tr>"
            "<th class='key'>model</th><th>rating</th><th>interval</th>"
            "<th>win rate vs anchor</th><th>games</th></tr>"
        )
        for r in pw.leaderboard(judge):
            out.append(
                f"<tr><td class='key'>{_e(r.model)}</td><td>{_f(r.rating, 1)}</td>"
                f"<td class='ci'>{_e(_ci(r.ci, 1))}</td><td>{_f(r.win_rate, 3)}</td>"
                f"<td>{r.games}</td></tr>"
            )
        out.append("</table>")
        out.append(_controlled_html(pw, judge))
        matrix = pw.matrix(judge)
        out.append(
            f"<h3>Win-rate matrix, judge {_e(judge)}</h3><table class='winrate'><tr>"
            "<th class='key'>row vs column</th>"
        )
        out += [f"<th>{_e(m)}</th>" for m in pw.models]
        out.append("</tr>")
        for a in pw.models:
            cells = "".join(f"<td>{_f(matrix.get((a, b)))}</td>" for b in pw.models)
            out.append(f"<tr><td class='key'>{_e(a)}</td>{cells}</tr>")
        out.append("</table>")
        out.append(_breakdown_html(pw, judge))
    out.append(
        "<h3>Position consistency</h3><table class='position'><tr>"
        "<th class='key'>judge</th><th class='key'>criterion</th><th>consistency</th>"
        "<th>interval</th><th>n</th><th>first-position preference</th>"
        "<th>n</th></tr>"
    )
    for p in pw.positions:
        out.append(
            f"<tr><td class='key'>{_e(p.judge)}</td><td class='key'>{_e(p.criterion)}</td>"
            f"<td>{_f(p.consistency, 3)}</td><td class='ci'>{_e(_ci(p.consistency_ci, 3))}</td>"
            f"<td>{p.n_swapped}</td><td>{_f(p.first_preference, 3)}</td>"
            f"<td>{p.n_decisive}</td></tr>"
        )
    out.append("</table>")
    if pw.label_accuracy:
        out.append(_accuracy_html(pw))
    if pw.one_order:
        out.append(
            "<h3>Judged in one order only</h3><p class='note'>Left out of the rates "
            "and ratings above.</p><table class='one-order'><tr><th class='key'>judge"
            "</th><th class='key'>pair</th><th>n</th><th>win</th><th>tie</th>"
            "<th>loss</th></tr>"
        )
        for w in pw.one_order:
            if w.criterion == ALL_CRITERIA:
                out.append(
                    f"<tr><td class='key'>{_e(w.judge)}</td><td class='key'>"
                    f"{_e(w.model_a)} vs {_e(w.model_b)}</td><td>{w.n}</td>"
                    f"<td>{_f(w.win, 3)}</td><td>{_f(w.tie, 3)}</td>"
                    f"<td>{_f(w.loss, 3)}</td></tr>"
                )
        out.append("</table>")
    out += [f"<p class='note'>{_e(n)}</p>" for n in pw.notes]
    return "".join(out)


def _controlled_html(pw: PairwiseReport, judge: str) -> str:
    """The length-controlled win rate and style-controlled rating of each model of
    ``judge``, best style-controlled rating first ('' when the report has none)."""
    rows = pw.controlled_board(judge)
    if not rows:
        return ""
    heads = (
        "win rate vs anchor",
        "length-controlled win rate",
        "interval",
        "style-controlled rating",
        "interval",
        "style-controlled win rate",
        "games",
    )
    out = [
        f"<h3>Controlled for length and style, judge {_e(judge)}</h3><table "
        "class='controlled'><tr><th class='key'>model</th>"
        + "".join(f"<th>{h}</th>" for h in heads)
        + "</tr>"
    ]
    for c in rows:
        out.append(
            f"<tr><td class='key'>{_e(c.model)}</td><td>{_f(c.raw_win, 3)}</td>"
            f"<td>{_f(c.lc_win, 3)}</td><td class='ci'>{_e(_ci(c.lc_ci, 3))}</td>"
            f"<td>{_f(c.style_rating, 1)}</td><td class='ci'>{_e(_ci(c.style_ci, 1))}</td>"
            f"<td>{_f(c.style_win, 3)}</td><td>{c.games}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _accuracy_html(pw: PairwiseReport) -> str:
    """Accuracy against the labels: a row per judge and group."""
    out = [
        "<h3>Accuracy against the labels</h3><p class='note'>Auto-J's rule: a comparison "
        "is right when the verdicts of both orders are; one order: the order as listed. "
        "Without tie labels: the comparisons labelled a tie left out.</p>"
        "<table class='accuracy'><tr><th class='key'>judge</th><th class='key'>group</th>"
        "<th>both orders</th><th>one order</th><th>both, no tie label</th>"
        "<th>one order, no tie label</th><th>judged in one order only</th></tr>"
    ]
    for acc in pw.label_accuracy:
        cells = "".join(
            f"<td>{_e(_tally(t))}</td>"
            for t in (acc.both, acc.listed, acc.both_no_tie, acc.listed_no_tie)
        )
        out.append(
            f"<tr><td class='key'>{_e(acc.judge)}</td><td class='key'>{_e(acc.group)}"
            f"</td>{cells}<td>{acc.n_one_order}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)
