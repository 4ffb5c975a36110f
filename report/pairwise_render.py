"""The pairwise part of a report as text, CSV, HTML and figures (pure: strings and bytes).

Per judge: a leaderboard (Bradley-Terry rating, interval, predicted win rate against the
anchor, games), the win-rate matrix (row model's score against the column model: win +
tie / 2) and position consistency with the first-position preference. The HTML page adds
a heatmap of the matrix and a bar chart of position consistency per judge.
"""

from __future__ import annotations

import html

from flask_eval.report.pairwise import ALL_CRITERIA
from flask_eval.report.pairwise_report import PAIRWISE_FIELDS, PairwiseReport
from flask_eval.report.plots import Plot, render


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(interval: tuple[float, float] | None, digits: int = 2) -> str:
    return "" if interval is None else f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def text(pw: PairwiseReport, level: int = 95) -> str:
    """Leaderboard, win-rate matrix and position bias per judge, as plain text."""
    lines = [f"Pairwise: {len(pw.models)} models, anchor {pw.anchor} (rating 1000)"]
    width = max([5, *(len(m) for m in pw.models)])
    for judge in pw.judges:
        lines += ["", f"Leaderboard | judge {judge} (Bradley-Terry, {level}% CI)"]
        lines.append(f"  {'model':<{width}}  {'rating':>7}  {'interval':<18}  "
                     f"{'win vs anchor':>13}  {'games':>6}")  # fmt: skip
        for r in pw.leaderboard(judge):
            lines.append(
                f"  {r.model:<{width}}  {_f(r.rating, 1):>7}  {_ci(r.ci, 1):<18}  "
                f"{_f(r.win_rate, 3):>13}  {r.games:>6}"
            )
        matrix = pw.matrix(judge)
        lines += [f"Win-rate matrix | judge {judge} (row's score vs column: win + tie/2)"]
        lines.append(f"  {'':<{width}}" + "".join(f"  {m[:8]:>8}" for m in pw.models))
        for a in pw.models:
            cells = "".join(f"  {_f(matrix.get((a, b))):>8}" for b in pw.models)
            lines.append(f"  {a:<{width}}{cells}")
    lines += ["", "Position bias (consistency: verdict survives the swap; first: non-tie "
              "verdicts that picked the first shown)"]  # fmt: skip
    for p in pw.positions:
        lines.append(
            f"  {p.judge} [{p.criterion}]: consistency {_f(p.consistency, 3)} "
            f"{_ci(p.consistency_ci, 3)} (n={p.n_swapped}); first {_f(p.first_preference, 3)} "
            f"{_ci(p.first_preference_ci, 3)} (n={p.n_decisive})"
        )
    if pw.label_accuracy:
        lines += ["", "Accuracy against the labels (with ties as a class; without: comparisons "
                  "labelled a tie left out)"]  # fmt: skip
        for acc in pw.label_accuracy:
            lines.append(
                f"  {acc.judge}: {_f(acc.accuracy, 3)} ({acc.correct}/{acc.n}); without ties "
                f"{_f(acc.accuracy_no_tie, 3)} ({acc.correct_no_tie}/{acc.n_no_tie}); "
                f"no verdict {acc.n_missing}"
            )
    for agree in pw.agreement:
        lines.append(f"  judges {agree.judge_a} and {agree.judge_b}: " + ", ".join(
            f"{k} {_f(v, 3) if isinstance(v, float) else v}" for k, v in vars(agree).items()
            if k not in ("judge_a", "judge_b")))  # fmt: skip
    lines += [f"note: {n}" for n in pw.notes]
    return "\n".join(lines) + "\n"


def csv(pw: PairwiseReport) -> str:
    """The pairwise rows as CSV (:data:`PAIRWISE_FIELDS`)."""
    from flask_eval.report.render import csv_text

    return csv_text(PAIRWISE_FIELDS, pw.rows())


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def html_section(pw: PairwiseReport, figures: str = "") -> str:
    """The pairwise section of the HTML page (tables; ``figures`` is inserted first)."""
    out = [figures, f"<p class='meta'>Anchor: {_e(pw.anchor)} (rating 1000).</p>"]
    for judge in pw.judges:
        out.append(f"<h3>Leaderboard, judge {_e(judge)}</h3><table class='leaderboard'><tr>"
                   "<th class='key'>model</th><th>rating</th><th>interval</th>"
                   "<th>win rate vs anchor</th><th>games</th></tr>")  # fmt: skip
        for r in pw.leaderboard(judge):
            out.append(
                f"<tr><td class='key'>{_e(r.model)}</td><td>{_f(r.rating, 1)}</td>"
                f"<td class='ci'>{_e(_ci(r.ci, 1))}</td><td>{_f(r.win_rate, 3)}</td>"
                f"<td>{r.games}</td></tr>"
            )
        out.append("</table>")
        matrix = pw.matrix(judge)
        out.append(f"<h3>Win-rate matrix, judge {_e(judge)}</h3><table class='winrate'><tr>"
                   "<th class='key'>row vs column</th>")  # fmt: skip
        out += [f"<th>{_e(m)}</th>" for m in pw.models]
        out.append("</tr>")
        for a in pw.models:
            cells = "".join(f"<td>{_f(matrix.get((a, b)))}</td>" for b in pw.models)
            out.append(f"<tr><td class='key'>{_e(a)}</td>{cells}</tr>")
        out.append("</table>")
    out.append("<h3>Position consistency</h3><table class='position'><tr>"
               "<th class='key'>judge</th><th class='key'>criterion</th><th>consistency</th>"
               "<th>interval</th><th>n</th><th>first-position preference</th>"
               "<th>n</th></tr>")  # fmt: skip
    for p in pw.positions:
        out.append(
            f"<tr><td class='key'>{_e(p.judge)}</td><td class='key'>{_e(p.criterion)}</td>"
            f"<td>{_f(p.consistency, 3)}</td><td class='ci'>{_e(_ci(p.consistency_ci, 3))}</td>"
            f"<td>{p.n_swapped}</td><td>{_f(p.first_preference, 3)}</td>"
            f"<td>{p.n_decisive}</td></tr>"
        )
    out.append("</table>")
    out += [f"<p class='note'>{_e(n)}</p>" for n in pw.notes]
    return "".join(out)


def plots(pw: PairwiseReport) -> list[Plot]:
    """A win-rate heatmap per judge and position consistency per judge."""
    out = []
    n = len(pw.models)
    for k, judge in enumerate(pw.judges):
        matrix = pw.matrix(judge)
        from matplotlib.figure import Figure  # drawing only: kept out of the CLI start-up

        fig = Figure(figsize=(1.2 + 0.9 * n, 0.9 + 0.8 * n))
        ax = fig.add_subplot()
        values = [[matrix.get((a, b), float("nan")) for b in pw.models] for a in pw.models]
        image = ax.imshow(values, vmin=0.0, vmax=1.0, cmap="RdYlGn")
        ax.set_xticks(range(n), pw.models, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(n), pw.models, fontsize=8)
        for i in range(n):
            for j in range(n):
                if i != j and (pw.models[i], pw.models[j]) in matrix:
                    ax.text(j, i, f"{values[i][j]:.2f}", ha="center", va="center", fontsize=8)
        ax.set_title(f"Win rate (row vs column), {judge}", fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046)
        png, svg = render(fig)
        out.append(Plot(f"winrate-{k}.png", f"Win-rate matrix, judge {judge}", png, svg, judge))
    rows = [p for p in pw.positions if p.criterion == ALL_CRITERIA and p.consistency is not None]
    if rows:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(1.5 + 1.2 * len(rows), 3.2))
        ax = fig.add_subplot()
        ax.bar(range(len(rows)), [p.consistency or 0.0 for p in rows], color="#4878d0")
        ax.set_xticks(range(len(rows)), [p.judge for p in rows], rotation=20, fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("position consistency")
        png, svg = render(fig)
        out.append(Plot("position.png", "Position consistency per judge", png, svg))
    return out
