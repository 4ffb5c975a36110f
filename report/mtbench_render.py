"""The MT-Bench section of a report as text and HTML (pure: strings only); the numbers
are :mod:`report.mtbench`'s."""

from __future__ import annotations

import html
import textwrap
from collections.abc import Sequence

from flask_eval.report.mtbench import PAIR_RULE, RULE, MTBench, PairScore, SingleScore
from flask_eval.report.pairwise_tally import ALL_TURNS
from flask_eval.report.textgrid import DEFAULT_WIDTH, MAX_KEY_WIDTH, clip, fmt

TITLE = "MT-Bench"

#: the turns' column titles, as FastChat's show_result.py titles its tables
_TURN_TITLES = {1: "First turn", 2: "Second turn"}


def turn_title(turn: int) -> str:
    return _TURN_TITLES.get(turn, f"Turn {turn}")


def _by_judge(rows: Sequence[SingleScore]) -> dict[str, list[SingleScore]]:
    out: dict[str, list[SingleScore]] = {}
    for row in rows:
        out.setdefault(row.judge, []).append(row)
    for mine in out.values():  # best first, as FastChat sorts its Average table
        mine.sort(key=lambda s: -(s.average if s.average is not None else float("-inf")))
    return out


def _pairs_by_judge(rows: Sequence[PairScore]) -> dict[str, dict[str, list[PairScore]]]:
    """judge -> group title (``all turns``, ``turn 1``, ..., then ``by category``) -> its
    rows, best first (by category: per category, best first)."""
    out: dict[str, dict[str, list[PairScore]]] = {}
    for row in rows:
        which = (
            "by category"
            if row.category is not None
            else "all turns"
            if row.turn == ALL_TURNS
            else f"turn {row.turn}"
        )
        out.setdefault(row.judge, {}).setdefault(which, []).append(row)
    for groups in out.values():
        for mine in groups.values():
            mine.sort(key=lambda p: (p.category or "", -(p.win_rate_adjusted or 0.0)))
    return out


def _pair_tables(section: MTBench) -> list[tuple[str, str, list[PairScore]]]:
    """(judge, group title, rows) of every pairwise table: per judge, all turns, each
    turn, then by category."""
    grouped = _pairs_by_judge([*section.pairwise, *section.pairwise_categories])
    return [
        (judge, which, rows) for judge, groups in grouped.items() for which, rows in groups.items()
    ]


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, DEFAULT_WIDTH, initial_indent="  ", subsequent_indent="  ")


def text(section: MTBench) -> list[str]:
    """The section as lines: per judge, each model's turn means and Average (best first),
    then per judge the pairwise tallies (all turns, each turn, then by category)."""
    lines = [TITLE]
    turns = section.turns
    for judge, scores in _by_judge(section.single).items():
        width = min(max([len("model"), *(len(s.model) for s in scores)]), MAX_KEY_WIDTH)
        heads = "".join(f"  {turn_title(t):>11}" for t in turns)
        lines += [
            f"  Judge {judge}: single-answer grading",
            f"  {'model':<{width}}{heads}  {'Average':>8}  {'n':>6}  {'left out':>8}",
        ]
        for s in scores:
            cells = "".join(f"  {fmt(s.turn_mean(t), 4):>11}" for t in turns)
            lines.append(
                f"  {clip(s.model, width):<{width}}{cells}  {fmt(s.average, 4):>8}  "
                f"{s.n:>6}  {s.n_excluded:>8}"
            )
        lines.append("")
    for judge, which, pairs in _pair_tables(section):
        width = min(max([len("model"), *(len(p.model) for p in pairs)]), MAX_KEY_WIDTH)
        cats = [p.category for p in pairs if p.category is not None]
        cw = min(max([len("category"), *(len(c) for c in cats)]), MAX_KEY_WIDTH) if cats else 0
        head = f"  {'category':<{cw}}" if cw else ""
        lines += [
            f"  Judge {judge}: pairwise, {which}",
            f"{head}  {'model':<{width}}  {'win':>5}  {'loss':>5}  {'tie':>5}  {'win_rate':>8}  "
            f"{'loss_rate':>9}  {'adjusted':>8}",
        ]
        lines += [
            (f"  {clip(p.category or '', cw):<{cw}}" if cw else "")
            + f"  {clip(p.model, width):<{width}}  {p.win:>5}  {p.loss:>5}  {p.tie:>5}  "
            f"{fmt(p.win_rate, 4):>8}  {fmt(p.loss_rate, 4):>9}  "
            f"{fmt(p.win_rate_adjusted, 4):>8}"
            for p in pairs
        ]
        lines.append("")
    if section.single:
        lines += _wrapped(RULE + ".")
    if section.pairwise:
        lines += _wrapped(PAIR_RULE + ".")
    lines += [line for note in section.notes for line in _wrapped(note)]
    return lines


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _td(value: float | None) -> str:
    return f"<td>{fmt(value, 4)}</td>"


def html_section(section: MTBench) -> str:
    """The section as HTML tables (the same content as :func:`text`)."""
    parts: list[str] = []
    turns = section.turns
    for judge, scores in _by_judge(section.single).items():
        parts.append(f"<h3>Judge {_e(judge)}: single-answer grading</h3>")
        head = "".join(f"<th>{_e(turn_title(t))}</th>" for t in turns)
        parts.append(
            f'<table><tr><th class="key">model</th>{head}<th>Average</th><th>n</th>'
            "<th>left out</th></tr>"
        )
        for s in scores:
            cells = "".join(_td(s.turn_mean(t)) for t in turns)
            parts.append(
                f'<tr><td class="key">{_e(s.model)}</td>{cells}{_td(s.average)}'
                f"<td>{s.n}</td><td>{s.n_excluded}</td></tr>"
            )
        parts.append("</table>")
    for judge, which, pairs in _pair_tables(section):
        cats = any(p.category is not None for p in pairs)
        parts.append(f"<h3>Judge {_e(judge)}: pairwise, {_e(which)}</h3>")
        parts.append(
            "<table><tr>"
            + ('<th class="key">category</th>' if cats else "")
            + '<th class="key">model</th><th>win</th><th>loss</th><th>tie</th>'
            "<th>win_rate</th><th>loss_rate</th><th>win_rate_adjusted</th></tr>"
        )
        parts += [
            "<tr>"
            + (f'<td class="key">{_e(p.category)}</td>' if cats else "")
            + f'<td class="key">{_e(p.model)}</td><td>{p.win}</td><td>{p.loss}</td>'
            f"<td>{p.tie}</td>{_td(p.win_rate)}{_td(p.loss_rate)}"
            f"{_td(p.win_rate_adjusted)}</tr>"
            for p in pairs
        ]
        parts.append("</table>")
    rules = ([RULE] if section.single else []) + ([PAIR_RULE] if section.pairwise else [])
    parts += [f"<p class='note'>{_e(n)}.</p>" for n in rules]
    parts += [f"<p class='note'>{_e(n)}</p>" for n in section.notes]
    return "".join(parts)
