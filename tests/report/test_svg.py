"""The report's figures as SVG (report.svg): well-formed, one mark per cell with data,
tooltips and links, escaped names, models best first in one colour each."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable

import pytest

from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND
from flask_eval.report import svg
from flask_eval.report.agreement import Agreement
from flask_eval.report.bootstrap import instance_weights
from flask_eval.report.breakdown import Aggregation, flask_breakdown
from flask_eval.report.document import Report, ReportRow, ranked_models, with_intervals
from flask_eval.report.metrics import (
    ABILITY,
    CAPABILITY,
    DOMAIN,
    KEY_SEP,
    OVERALL,
    OVERALL_KEY,
    SKILL,
    SKILL_DIFFICULTY,
)
from flask_eval.report.pairwise import Comparison, instances_of
from flask_eval.report.pairwise_bias import Position
from flask_eval.report.pairwise_report import PairwiseReport, build
from flask_eval.report.svg import Cell, PairCell
from tests.reference import from_records
from tests.report.test_bootstrap import ABILITY as ABILITY_OF
from tests.report.test_bootstrap import SKILLS, intervals_of, random_records

NS = "{http://www.w3.org/2000/svg}"
EVIL = "<script>alert(1)</script>"
FIGURES: dict[str, str] = {
    "radar": SKILL,
    "ability_bars": ABILITY,
    "domain_heatmap": DOMAIN,
    "difficulty_curves": SKILL_DIFFICULTY,
}


def realistic(models: int = 3) -> Report:
    """A report of random judgments (FLASK's skills), with bootstrap intervals."""
    names = tuple(f"model-{k}" for k in range(models))
    table = from_records(random_records(41, instances=60, models=names, judges=("j1", "j2")))
    intervals = intervals_of(table, instance_weights(len(table.instances), 40, 0))
    rows = with_intervals(Aggregation(table, flask_breakdown(ABILITY_OF)).rows(), intervals)
    return Report(
        run="r",
        rows=rows,
        models=list(table.models),
        judges=list(table.judges),
        skills=list(SKILLS.names),
        abilities=list(SKILLS.abilities),
        ability_of=ABILITY_OF,
        domains=list(table.domains),
    )


def hostile() -> Report:
    """Three models (one named like a script), names full of markup, one missing cell."""
    models, judge = ["b&b", EVIL, "plain"], "j\"1'<"
    skills, domains = ["Logic & <b>", "s'2", 'F"3'], ["<d1>", "d&2"]
    base = {"plain": 4.0, EVIL: 3.0, "b&b": 2.0}
    rows: list[ReportRow] = []

    def add(model: str, dimension: str, key: str, mean: float | None) -> None:
        ci = (None, None) if mean is None else (mean - 0.25, mean + 0.25)
        rows.append(
            ReportRow(
                model,
                judge,
                dimension,
                key,
                mean,
                0 if mean is None else 7,
                2 if mean is None else 0,
                0,
                *ci,
            )
        )

    for m in models:
        add(m, OVERALL, OVERALL_KEY, base[m])
        for k, s in enumerate(skills):
            add(m, SKILL, s, None if (m, k) == ("b&b", 2) else base[m] - 0.3 * k)
            for level in (1, 2, 3):
                add(m, SKILL_DIFFICULTY, f"{s}{KEY_SEP}{level}", base[m] - 0.1 * level)
        add(m, ABILITY, "<ability>", base[m] + 0.1)
        for d in domains:
            add(m, DOMAIN, d, base[m] - 0.2)
    return Report(
        run="r",
        rows=rows,
        models=models,
        judges=[judge],
        skills=skills,
        abilities=["<ability>"],
        domains=domains,
    )


def parse(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == f"{NS}svg" and root.get("role") == "img" and root.get("aria-label")
    assert root.get("width") == "100%" and root.get("viewBox")
    assert not [e for e in root.iter() if e.tag.removeprefix(NS) in ("script", "foreignObject")]
    return root


def marks(root: ET.Element, missing: bool = False) -> list[ET.Element]:
    return [
        e
        for e in root.iter()
        if "cell" in (e.get("class") or "").split()
        and ("missing" in (e.get("class") or "").split()) == missing
    ]


def link_root(elements: list[ET.Element]) -> ET.Element:
    """An element holding ``elements``, to count marks among them."""
    root = ET.Element("g")
    root.extend(elements)
    return root


def title_of(element: ET.Element) -> str:
    found = element.find(f"{NS}title")
    assert found is not None and found.text
    return found.text


def legend_colours(root: ET.Element) -> list[tuple[str, str]]:
    items = [e for e in root.iter() if e.get("class") == "legend-item"]
    return [
        (e.get("data-model") or "", e.find(f"{NS}rect").get("fill") or "")  # type: ignore[union-attr]
        for e in items
    ]


def draw(name: str) -> Callable[..., str]:
    figure: Callable[..., str] = getattr(svg, name)
    return figure


def with_mean(report: Report, judge: str, dimension: str) -> dict[tuple[str, str], ReportRow]:
    return {
        (r.model, r.key): r
        for r in report.rows
        if r.judge == judge and r.dimension == dimension and r.mean is not None
    }


@pytest.mark.parametrize("models", [3, 6])
def test_a_mark_per_cell_with_data_each_titled_with_its_mean_n_and_interval(models: int) -> None:
    report = realistic(models)
    for name, dimension in FIGURES.items():
        root = parse(draw(name)(report, "j1"))
        cells = with_mean(report, "j1", dimension)
        drawn = marks(root)
        assert len(drawn) == len(cells), name
        for element in drawn:
            assert element.get("data-judge") == "j1" and element.get("data-dimension") == dimension
            row = cells[(element.get("data-model") or "", element.get("data-key") or "")]
            assert row.mean is not None and row.ci_low is not None and row.ci_high is not None
            tip = title_of(element)
            assert f"mean {row.mean:.2f}" in tip and f"n {row.n}" in tip, tip
            assert f"interval {row.ci_low:.2f}–{row.ci_high:.2f}" in tip
    assert svg.capability_heatmap(report, "j1") == ""  # no capabilities: no figure


def test_links_where_href_gives_a_url_none_elsewhere() -> None:
    report = realistic()

    def href(cell: Cell) -> str | None:
        if cell.model == "model-1":
            return None
        if cell.model == "model-2":
            return "javascript:alert(1)"
        return f"/cell?model={cell.model}&dimension={cell.dimension}&key={cell.key}"

    for name, dimension in FIGURES.items():
        plain, linked = draw(name)(report, "j1"), draw(name)(report, "j1", href)
        assert "<a " not in plain
        root = parse(linked)
        links = [e for e in root.iter(f"{NS}a")]
        rows = with_mean(report, "j1", dimension)
        linked_marks = [mark for link in links for mark in link]
        assert len(linked_marks) == len(links) and {m.get("data-model") for m in linked_marks} == {
            "model-0"
        }
        assert len(marks(link_root(linked_marks))) == sum(1 for m, _ in rows if m == "model-0")
        for link, mark in zip(links, linked_marks, strict=True):
            model, key = mark.get("data-model"), mark.get("data-key")
            assert link.get("href") == f"/cell?model={model}&dimension={dimension}&key={key}"
        assert "javascript" not in linked and "&amp;dimension=" in linked


def test_hostile_names_stay_text_and_a_missing_cell_is_grey_no_data() -> None:
    report = hostile()
    judge = report.judges[0]

    def href(cell: Cell) -> str:
        return f"/m/{cell.model}?k={cell.key}"

    for text in [draw(name)(report, judge, href) for name in FIGURES]:
        assert "<script" not in text and EVIL.replace("<", "&lt;").replace(">", "&gt;") in text
        root = parse(text)
        models = {e.get("data-model") for e in marks(root)}
        assert models == {"plain", EVIL, "b&b"}
        assert any((e.get("href") or "").startswith(f"/m/{EVIL}?k=") for e in root.iter(f"{NS}a"))
    root = parse(svg.radar(report, judge))
    (missing,) = marks(root, missing=True)
    assert missing.get("data-model") == "b&b" and missing.get("data-key") == 'F"3'
    assert title_of(missing) == 'b&b — F"3: no data (2 N/A, 0 failed)'
    assert len(marks(root)) == 8


def test_models_best_first_in_one_colour_across_figures() -> None:
    for report, judge in ((realistic(5), "j1"), (hostile(), "j\"1'<")):
        ranked = ranked_models(report.rows, report.models)
        assert ranked != report.models  # so that the order below is the ranking's
        colours = svg.colors(report)
        assert list(colours) == ranked and len(set(colours.values())) == len(ranked)
        for name in ("ability_bars", "difficulty_curves"):
            root = parse(draw(name)(report, judge))
            assert legend_colours(root) == list(colours.items())  # best first
            assert {(m.get("data-model"), m.get("fill")) for m in marks(root)} <= set(
                colours.items()
            )
        radar = parse(svg.radar(report, judge))  # five models: a small radar each
        series = [
            (g.get("data-model"), g.get("stroke"))
            for g in radar.iter(f"{NS}g")
            if g.get("class") == "series"
        ]
        if len(ranked) > svg.RADAR_OVERLAY_MAX:
            assert sorted(series) == sorted(colours.items())
        else:
            assert legend_colours(radar) == list(colours.items())
        root = parse(svg.domain_heatmap(report, judge))
        rows = [e.get("data-model") for e in marks(root) if e.get("data-key") == report.domains[0]]
        assert rows == ranked  # heatmap rows: best first


def test_colours_are_matplotlibs() -> None:
    colormaps = pytest.importorskip("matplotlib").colormaps
    from matplotlib.colors import to_hex

    for n, name in ((4, "tab10"), (13, "tab20")):
        models = [f"m{k}" for k in range(n)]
        expected = [to_hex(colormaps[name](k % colormaps[name].N)) for k in range(n)]
        assert list(svg.palette(models).values()) == expected
    for stops, name in ((svg.VIRIDIS, "viridis"), (svg.RDYLGN, "RdYlGn")):
        for x in (0.0, 0.1, 0.5, 0.9, 1.0):
            assert svg.ramp(stops, x) == to_hex(colormaps[name](x))


def test_capabilities_draw_their_heatmap_and_radar() -> None:
    report = hostile()
    judge = report.judges[0]
    caps = ["grounding", "planning", "<safety>"]
    report.capabilities = caps
    report.rows += [
        ReportRow(m, judge, CAPABILITY, c, 3.0 + k / 4, 5, 0, 0)
        for m in report.models
        for k, c in enumerate(caps)
    ]
    root = parse(svg.capability_heatmap(report, judge))
    assert len(marks(root)) == 9 and {e.get("data-dimension") for e in marks(root)} == {CAPABILITY}
    rows = [e.get("data-key") for e in marks(root) if e.get("data-model") == "plain"]
    assert rows == caps  # capabilities as rows, models as columns
    radar = parse(svg.radar(report, judge))
    assert {e.get("data-key") for e in marks(radar)} == set(caps)


def pairwise(names: tuple[str, ...] = ("m1", "m2", EVIL)) -> PairwiseReport:
    """Three models, the later ones stronger; each pair judged in both orders per instance."""
    records = []
    for i in range(12):
        for x in range(3):
            for y in range(x + 1, 3):
                a, b = names[x], names[y]
                b_wins = (i + x) % 4 > 0
                first, second = (
                    (VERDICT_SECOND, VERDICT_FIRST) if b_wins else (VERDICT_FIRST, VERDICT_SECOND)
                )
                records += [
                    Comparison(f"i{i}", a, b, "overall", "j", first),
                    Comparison(f"i{i}", b, a, "overall", "j", second),
                ]
    inst = instances_of(records)
    return build(records, instance_weights(len(inst), 30, 0), inst, models=list(names))


def test_win_matrix_cells_link_and_mirror_each_other() -> None:
    report = pairwise()
    seen: list[PairCell] = []

    def href(cell: PairCell) -> str:
        seen.append(cell)
        return f"/pair/{cell.model_a}/{cell.model_b}"

    text = svg.win_matrix(report, "j", "all", href)
    root = parse(text)
    cells = marks(root)
    assert len(cells) == 6 and len(seen) == 6 and "<script" not in text
    score = {}
    for cell in cells:
        a, b = cell.get("data-model-a"), cell.get("data-model-b")
        tip = title_of(cell)
        assert tip.startswith(f"{a} vs {b}: score ")
        score[(a, b)] = float(tip.split("score ")[1][:4])
    for (a, b), value in score.items():
        assert value + score[(b, a)] == pytest.approx(1.0, abs=0.011)
    assert {e.get("href") for e in root.iter(f"{NS}a")} == {
        f"/pair/{c.model_a}/{c.model_b}" for c in seen
    }
    board = [r.model for r in report.leaderboard("j")]
    rows = [c.get("data-model-a") for c in cells if c.get("data-model-b") == board[-1]]
    assert rows == board[:-1]  # rows best first by rating
    assert "<a " not in svg.win_matrix(report, "j", "all")


def test_ratings_chart_best_first_with_intervals() -> None:
    report = pairwise()
    root = parse(svg.ratings_chart(report, "j", "all"))
    dots = marks(root)
    board = report.leaderboard("j")
    assert [d.get("data-model") for d in dots] == [r.model for r in board]
    assert [float(d.get("cy") or 0) for d in dots] == sorted(float(d.get("cy") or 0) for d in dots)
    for dot, rating in zip(dots, board, strict=True):
        assert rating.rating is not None and rating.ci is not None
        assert f"rating {rating.rating:.0f}, interval {rating.ci[0]:.0f}" in title_of(dot)
    colours = svg.pair_colors(report)
    assert [d.get("fill") for d in dots] == [colours[r.model] for r in board]


def test_agreement_matrix_has_a_cell_per_pair_of_raters() -> None:
    rows = [
        Agreement("a", EVIL, None, 40, 0.5, 0.5, 0.4, 0.61234, 0.3, 0.8),
        Agreement("a", EVIL, "Factuality", 9, 0.1, 0.1, 0.1, -0.9, 0.1, 0.2),
    ]
    root = parse(svg.agreement_matrix(rows, ["a", EVIL, "c"]))
    tips = {(m.get("data-judge-a"), m.get("data-judge-b")): title_of(m) for m in marks(root)}
    assert len(tips) == 5 and tips[(EVIL, "a")] == f"{EVIL} vs a: krippendorff alpha 0.612, n 40"
    missing = marks(root, missing=True)  # c was never compared
    assert len(missing) == 4 and all(title_of(m).endswith("no data") for m in missing)


def test_position_chart_a_bar_per_judge_with_its_interval() -> None:
    positions = [
        Position(EVIL, "all", 40, 0.75, 60, 0.55, (0.6, 0.85), (0.45, 0.65)),
        Position(EVIL, "style", 40, 0.5, 60, 0.5),  # a single criterion: not drawn
        Position("b", "all", 0, None, 0, None),  # judged in one order only: no bar
        Position("c", "all", 12, 0.25, 10, None),
    ]
    text = svg.position_chart(positions)
    root = parse(text)
    bars = marks(root)
    assert [b.get("data-judge") for b in bars] == [EVIL, "c"] and "<script" not in text
    assert title_of(bars[0]) == (
        f"{EVIL}: consistency 0.750, interval 0.600–0.850, n 40 judged in both orders; "
        "first-position preference 0.550, n 60"
    )
    assert "first-position preference no data" in title_of(bars[1])
    heights = [float(b.get("height") or 0) for b in bars]
    assert heights[0] == pytest.approx(3 * heights[1], abs=0.2)  # 0.75 vs 0.25 of one axis
    assert len([e for e in root.iter(f"{NS}path") if e.get("class") == "whisker"]) == 1
    assert svg.position_chart(positions[1:3]) == ""


def test_a_figure_as_a_file_is_the_same_drawing_sized_in_pixels() -> None:
    figure = svg.radar(hostile(), "j\"1'<")
    data = svg.standalone(figure).decode()
    assert data.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<svg ')
    root = ET.fromstring(data.encode())
    _, _, width, height = (root.get("viewBox") or "").split()
    assert (root.get("width"), root.get("height"), root.get("style")) == (width, height, None)
    drawing = data.split("\n")[1]
    assert drawing.replace(f'width="{width}" height="{height}"', "") == figure.replace(
        f'width="100%" style="max-width: {float(width) * 1.25:.1f}px"', ""
    )
