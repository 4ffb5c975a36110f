"""A self-contained HTML report: tables and the figures as inline SVG.

No network and no external CSS or JavaScript: the page opens from a file anywhere. The
figures are :mod:`report.svg`'s, the drawings the viewer serves (:mod:`report.figures`
lists them); each is written next to the page too, as an ``.svg`` file (for papers; a
browser or any SVG converter makes a PNG of it). Tables show models best first and
difficulty levels with FLASK's names. When the instances carry BiGGen Bench's
capabilities, the page adds BiGGen's overall (the mean of capability means, said so under
the table), a capability x model heatmap and the capability and task tables. When people
rated items of the run, a People section (``report.people_render``) follows; its
disagreements link to the items' judgments when the caller says where
(``item_href``, e.g. the viewer's judgments page). A run with probes can end with its
judge card (``report.probe_card_html``). A few lines
of inline script record, once the page has loaded, how many figures were laid out with a
size (``<body data-figures="drawn/total">``), which tests read from the rendered DOM.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

from flask_eval.report.document import Report, ReportRow, level_label, ranked_models
from flask_eval.report.figures import Figure, all_figures
from flask_eval.report.metrics import (
    ABILITY,
    BIGGEN_KEY,
    CAPABILITY,
    DIFFICULTY,
    DOMAIN,
    OVERALL,
    OVERALL_KEY,
    SKILL,
    TASK,
    TURN,
)
from flask_eval.report.people_render import ItemHref
from flask_eval.report.people_render import html_section as people_section
from flask_eval.report.probe_card_html import PairsHref, card_html
from flask_eval.report.probe_types import Card
from flask_eval.report.render import fmt, fmt_interval

PAGE = "report.html"

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 24px 32px; color: #1d1d1f; background: #fff; font-size: 14px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.meta { color: #555; margin: 0 0 8px; } nav a { margin-right: 12px; color: #0a58ca; }
table { border-collapse: collapse; margin: 6px 0 14px; font-size: 13px; }
th, td { border: 1px solid #d8d8d8; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #f3f4f6; } td.key, th.key { text-align: left; }
.ci { color: #666; font-size: 11px; } .n { color: #888; font-size: 11px; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
figure { margin: 0; flex: 0 1 640px; } figure svg { display: block; border: 1px solid #eee; }
figure.wide { flex: 0 1 1000px; }
figcaption { font-size: 12px; color: #555; }
.in-progress { padding: 8px 12px; background: #fff4e5; border: 1px solid #f0b35a;
  font-weight: 600; }
.pos { color: #0a7d2c; } .neg { color: #b42318; } .note { color: #555; font-size: 12px; }
"""

SCRIPT = """
window.addEventListener("load", function () {
  var figures = Array.prototype.slice.call(document.querySelectorAll("svg.fe-figure"));
  var ok = figures.filter(function (f) {
    var box = f.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && f.getBBox().width > 0;
  }).length;
  document.body.setAttribute("data-figures", ok + "/" + figures.length);
});
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _figure(figure: Figure, wide: bool = False) -> str:
    """A figure's SVG as :mod:`report.svg` drew it (its ``aria-label`` names it), its
    caption and file name under it."""
    cls = "svg wide" if wide else "svg"
    return (
        f'<figure class="{cls}" data-figure="{_e(figure.name)}">{figure.svg}'
        f"<figcaption>{_e(figure.title)} ({_e(figure.file_name)})</figcaption></figure>"
    )


def _cell(row: ReportRow | None) -> str:
    if row is None:
        return "<td></td>"
    interval = fmt_interval(row.ci_low, row.ci_high)
    ci = f' <span class="ci">{_e(interval)}</span>' if interval else ""
    return f'<td>{fmt(row.mean)}{ci} <span class="n">n={row.n}</span></td>'


def _matrix(
    rows: Sequence[ReportRow], keys: Sequence[str], cols: Sequence[str], by: str, head: str
) -> str:
    """A table of keys (rows) by models or judges (columns, per ``by``)."""
    cells = {(r.key, getattr(r, by)): r for r in rows}
    out = [f'<table><tr><th class="key">{_e(head)}</th>']
    out += [f"<th>{_e(c)}</th>" for c in cols]
    out.append("</tr>")
    for key in keys:
        shown = level_label(key) if rows and rows[0].dimension == DIFFICULTY else key
        out.append(f'<tr><td class="key">{_e(shown)}</td>')
        out += [_cell(cells.get((key, c))) for c in cols]
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _keys(rows: Sequence[ReportRow], order: Sequence[str]) -> list[str]:
    present = list(dict.fromkeys(r.key for r in rows))
    ranked = [k for k in order if k in present]
    rest = [k for k in present if k not in ranked]
    if rest and all(k.isdigit() for k in rest):
        rest.sort(key=int)
    return ranked + rest


def _section_tables(report: Report, dimension: str, order: Sequence[str], head: str) -> str:
    parts = []
    for judge in report.judges:
        rows = [r for r in report.rows if r.judge == judge and r.dimension == dimension]
        if rows:
            parts.append(f"<h3>Judge {_e(judge)}</h3>")
            models = ranked_models(report.rows, report.models)
            parts.append(_matrix(rows, _keys(rows, order), models, "model", head))
    return "".join(parts)


def _overall(report: Report, key: str = OVERALL_KEY) -> str:
    rows = [r for r in report.rows if r.dimension == OVERALL and r.key == key]
    if not rows:
        return "<p>No finished judgments.</p>"
    cells = {(r.model, r.judge): r for r in rows}
    judges = [j for j in report.judges if any(r.judge == j for r in rows)]
    out = ['<table><tr><th class="key">model</th>']
    out += [f"<th>{_e(j)}</th>" for j in judges]
    out.append("</tr>")
    for model in ranked_models(report.rows, report.models):  # best first
        out.append(f'<tr><td class="key">{_e(model)}</td>')
        out += [_cell(cells.get((model, j))) for j in judges]
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _comparisons(report: Report) -> str:
    if not report.comparisons:
        return "<p>Fewer than two models.</p>"
    out = [
        "<table><tr><th class='key'>judge</th><th class='key'>model A</th>"
        "<th class='key'>model B</th><th>instances</th><th>mean A</th><th>mean B</th>"
        "<th>A − B</th><th>interval</th></tr>"
    ]
    for c in report.comparisons:
        sign = ""
        if c.ci_low is not None and c.ci_high is not None:
            sign = "pos" if c.ci_low > 0 else "neg" if c.ci_high < 0 else ""
        out.append(
            f"<tr><td class='key'>{_e(c.judge)}</td><td class='key'>{_e(c.model_a)}</td>"
            f"<td class='key'>{_e(c.model_b)}</td><td>{c.n_instances}</td>"
            f"<td>{fmt(c.mean_a)}</td><td>{fmt(c.mean_b)}</td>"
            f"<td class='{sign}'>{fmt(c.diff, 3)}</td>"
            f"<td class='{sign}'>{_e(fmt_interval(c.ci_low, c.ci_high, 3))}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _agreement(report: Report) -> str:
    if not report.agreement:
        return "<p>No pair of judges scored the same judgments.</p>"
    heads = (
        "judge A",
        "judge B",
        "skill",
        "n",
        "Pearson",
        "Spearman",
        "Kendall τ-b",
        "Krippendorff α",
        "exact",
        "within 1",
    )
    cells = [f"<th{' class=key' if k < 3 else ''}>{_e(h)}</th>" for k, h in enumerate(heads)]
    out = ["<table><tr>", *cells, "</tr>"]
    for r in report.agreement:
        values = (r.pearson, r.spearman, r.kendall_tau_b, r.krippendorff_alpha, r.exact)
        stats = "".join(f"<td>{fmt(v, 3)}</td>" for v in (*values, r.within1))
        out.append(
            f"<tr><td class='key'>{_e(r.judge_a)}</td><td class='key'>{_e(r.judge_b)}</td>"
            f"<td class='key'>{_e(r.skill or 'all skills')}</td><td>{r.n}</td>{stats}</tr>"
        )
    out.append("</table>")
    return "".join(out)


def _self_consistency(report: Report) -> str:
    heads = ("judge", "samples", "items", "all equal", "mean sd", "ICC(1)")
    cells = [f"<th{' class=key' if k < 1 else ''}>{_e(h)}</th>" for k, h in enumerate(heads)]
    out = ["<table><tr>", *cells, "</tr>"]
    for r in report.self_consistency:
        stats = "".join(f"<td>{fmt(v, 3)}</td>" for v in (r.all_equal, r.mean_sd, r.icc))
        out.append(
            f"<tr><td class='key'>{_e(r.judge)}</td><td>{r.samples}</td>"
            f"<td>{r.items}</td>{stats}</tr>"
        )
    out.append("</table>")
    return "".join(out)


def _in_progress(report: Report) -> str:
    """The banner of a report whose run is in progress (its pending count); else ''."""
    if report.progress is None or not report.progress.in_progress:
        return ""
    return f"<p class='in-progress' id='in-progress'>{_e(report.progress.describe())}</p>"


def render(
    report: Report,
    figures_drawn: Sequence[Figure],
    item_href: ItemHref | None = None,
    card: Card | None = None,
    pairs_href: PairsHref | None = None,
) -> str:
    """The whole page as one string, with ``figures_drawn`` (:func:`all_figures`);
    ``item_href`` links the People section's items (None: no links); ``card``, the judge
    card of a run with probes, is its last section, each effect linking to
    ``pairs_href(judge, key)`` when given."""
    boot = report.bootstrap
    level = round(100 * float(boot.get("confidence", 0.95)))
    by_kind: dict[str, list[Figure]] = {}
    for figure in figures_drawn:
        by_kind.setdefault(figure.kind, []).append(figure)

    def figures(kind: str, wide: bool = False) -> str:
        found = by_kind.get(kind, [])
        return '<div class="figures">' + "".join(_figure(p, wide) for p in found) + "</div>"

    coverage = ", ".join(f"{_e(m)} {a}/{t}" for m, (a, t) in report.coverage.items())
    if boot.get("replicates"):
        method = (
            f"{level}% percentile bootstrap intervals, {boot.get('replicates')} replicates "
            f"resampling {boot.get('instances')} instances (seed {boot.get('seed')})"
        )
    else:
        method = "no bootstrap intervals (--bootstrap 0)"
    notes = "".join(f"<p class='note'>{_e(n)}</p>" for n in report.notes)
    sampling = "".join(
        f"<li><b>{_e(j.name)}</b>: {_e(j.describe())}</li>" for j in report.judge_settings
    )
    if sampling:
        sampling = f"<p class='meta'>How each judge was sampled:</p><ul class='meta'>{sampling}"
        sampling += "</ul>"
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    overall = _overall(report)
    for d in report.definitions:
        if d["dimension"] == OVERALL and d["key"] == BIGGEN_KEY:
            overall += f"<h3>{_e(d['label'])}</h3>" + _overall(report, BIGGEN_KEY)
            overall += f"<p class='note'>{_e(d['definition'])}</p>"
    groups = []
    if report.capabilities:
        groups = [
            (
                "capabilities",
                "Capabilities",
                figures("capabilities")
                + figures("radar")
                + _section_tables(report, CAPABILITY, report.capabilities, "capability"),
            ),
            ("tasks", "Tasks", _section_tables(report, TASK, report.tasks, "task")),
        ]
    elif report.tasks:
        groups = [("tasks", "Tasks", _section_tables(report, TASK, report.tasks, "task"))]
    skill_figures = "" if report.capabilities else figures("radar")
    turns = [("turns", "Turns", _section_tables(report, TURN, (), "turn"))]
    sections = [
        ("overall", "Overall", overall),
        *(turns if any(r.dimension == TURN for r in report.rows) else []),
        (
            "skills",
            "Skills",
            skill_figures + _section_tables(report, SKILL, report.skills, "skill"),
        ),
        *groups,
        (
            "abilities",
            "Abilities",
            figures("abilities") + _section_tables(report, ABILITY, report.abilities, "ability"),
        ),
        (
            "domains",
            "Domains",
            figures("domains") + _section_tables(report, DOMAIN, report.domains, "domain"),
        ),
        (
            "difficulty",
            "Difficulty",
            figures("difficulty", wide=True) + _section_tables(report, DIFFICULTY, (), "level"),
        ),
        ("comparisons", "Paired model comparisons (overall)", _comparisons(report)),
        ("agreement", "Judge agreement", figures("agreement") + _agreement(report)),
    ]
    if report.self_consistency:
        sections.append(("self-consistency", "Self-consistency", _self_consistency(report)))
    if report.pairwise is not None:
        from flask_eval.report.pairwise_render import html_section

        if not report.rows:  # a pairwise run has no absolute grades: no empty sections
            sections = []
        figs = figures("winrate") + figures("ratings") + figures("position")
        sections.insert(0, ("pairwise", "Pairwise ranking", html_section(report.pairwise, figs)))
    if report.mtbench is not None:
        from flask_eval.report.mtbench_render import html_section as mtbench_html

        sections.insert(1, ("mt-bench", "MT-Bench", mtbench_html(report.mtbench)))
    if report.people is not None:
        sections.append(("people", "People", people_section(report.people, level, item_href)))
    if report.calibration is not None:
        from flask_eval.report.calibration_render import html_section as calibration_html
        from flask_eval.report.calibration_render import title

        sections.append(
            ("calibration", title(report.calibration), calibration_html(report.calibration))
        )
    if card is not None:
        sections.append(("judge-card", "Judge card", card_html(card, pairs_href=pairs_href)))
    nav = "".join(f'<a href="#{sid}">{_e(title)}</a>' for sid, title, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{_e(t)}</h2>{c}</section>' for sid, t, c in sections)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>flask-eval report: {_e(report.run)}</title><style>{CSS}</style></head>"
        f"<body><h1>flask-eval report: {_e(report.run)}</h1>{_in_progress(report)}"
        f"<p class='meta'>{len(report.models)} models, {len(report.judges)} judges; "
        f"coverage: {coverage or '-'}. Means over (instance, skill) pairs on a "
        f"{report.scale.text} scale, "
        f"N/A and failures excluded; {_e(method)}. Generated {stamp}.</p>{sampling}{notes}"
        f"<nav>{nav}</nav>{body}<script>{SCRIPT}</script></body></html>\n"
    )


def write_report(
    report: Report,
    out_dir: Path,
    *,
    progress: bool = False,
    item_href: ItemHref | None = None,
    card: Card | None = None,
) -> Path:
    """Write ``report.html`` and every figure as an SVG file into ``out_dir``; returns the
    page (``item_href``, ``card``: :func:`render`'s)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    judges = sum(1 for j in report.judges if any(r.judge == j for r in report.rows))
    with tqdm(
        total=judges + 1, desc="figures", unit="judge", disable=not progress, leave=False
    ) as bar:
        drawn = all_figures(report, progress=bar.update)
    for figure in drawn:
        (out_dir / figure.file_name).write_bytes(figure.file())
    page = out_dir / PAGE
    page.write_text(render(report, drawn, item_href, card=card), encoding="utf-8")
    return page


def card_page(card: Card) -> str:
    """A judge card as a page of its own (`flask-eval card RUN --format html`)."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>flask-eval judge card: {_e(card.run)}</title><style>{CSS}</style></head>"
        f"<body><h1>flask-eval judge card: {_e(card.run)}</h1>"
        f"{card_html(card)}</body></html>\n"
    )
