"""The judge card as HTML: hostile names escaped, every effect's numbers shown and linked
to its pairs (table and forest plot, one mark per effect), and the pairs behind an effect
linking to the original's and the twin's judgments."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from flask_eval.report.html import render
from flask_eval.report.probe_card_html import PAIR_KEYS, card_html, pair_variants, pairs_html
from flask_eval.report.probe_types import Card, JudgeCard
from tests.report.probe_cards import HOSTILE, JUDGES, MODEL, card, effect, inputs
from tests.report.test_html_report import make_report


def _href(judge: str, key: str) -> str:
    return f"/pairs?judge={quote(judge, safe='')}&key={quote(key, safe='')}"


def _item(**params: str) -> str:
    return "/items?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in sorted(params.items()))


def test_hostile_names_are_escaped_everywhere() -> None:
    page = card_html(card(run=HOSTILE), pairs_href=_href)
    assert "<script>" not in page and "alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    pairs = pairs_html(inputs(), HOSTILE, "length+50", item_href=_item)
    assert "<script>" not in pairs and "<b>" not in pairs
    assert "m&lt;b&gt;1" in pairs


def test_every_effect_shows_its_numbers_and_links_to_its_pairs() -> None:
    page = card_html(card(), pairs_href=_href)
    section = page.split("id='card-0'")[1].split("</section>")[0]
    table = section.split("id='card-0-effects'")[1].split("</table>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    assert len(rows) == 3
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", rows[0])]
    assert cells == [
        "length+50",
        "score change",
        "0.875",
        "[0.625, 1.125]",
        "&lt;0.001",
        "yes",
        "8",
        "2",
        "fails (gate 0.500)",
    ]
    assert "0.620" in rows[1] and ">no<" in rows[1]
    for key in ("length+50", "style", "swap"):
        assert f"href='{_href('good', key).replace('&', '&amp;')}'" in section
    assert "Order consistency: 0.750" in section
    assert "5.0%" in section and "2.5%" in section  # unparseable 2 and refused 1 of 40
    assert "812 ms" in section and "$0.00042" in section
    assert "0.710" in section and "0.680" in section and "0.900" in section
    assert "self: no model of another family than good" in section
    assert "1 effect failed the gate" not in page  # one per judge: two
    assert "2 effects failed the gate" in page


def test_the_forest_plot_has_one_linked_mark_per_effect_and_a_zero_line() -> None:
    page = card_html(card(), pairs_href=_href)
    for n, judge in enumerate(JUDGES):
        section = page.split(f"id='card-{n}'")[1].split("</section>")[0]
        svg = section.split("<svg", 1)[1].split("</svg>", 1)[0]
        marks = re.findall(r"<circle class=\"cell\"[^>]*>", svg)
        assert len(marks) == 3
        assert svg.count('class="zero"') == 1
        assert svg.count('class="whisker"') == 3
        links = re.findall(r'<a href="([^"]+)"><circle', svg)
        assert len(links) == 3 and all(link.startswith("/pairs?judge=") for link in links)
        assert "<script>" not in svg, judge


def test_without_pairs_href_nothing_links() -> None:
    page = card_html(card())
    assert "href" not in page
    assert page.count('class="cell"') == 6


def test_a_link_that_could_run_code_is_dropped() -> None:
    page = card_html(card(), pairs_href=lambda judge, key: "javascript:alert(1)")
    assert "javascript:" not in page


def test_a_judge_without_effects_says_so() -> None:
    page = card_html(Card("r", (JudgeCard("j", ()),)))
    assert "No probe effect could be measured" in page and "<svg" not in page


def test_twin_pairs_list_scores_words_and_link_to_both_judgments() -> None:
    pairs = pairs_html(inputs(), "good", "length+50", item_href=_item)
    rows = re.findall(r"<tr>(.*?)</tr>", pairs)[1:]
    assert len(rows) == 4  # two models x two instances
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", rows[0])]
    assert cells[4:9] == ["3.00", "4.00", "+1.00", "100", "150"]
    original = _item(model=MODEL, instance="1", criterion="clarity", judge="good")
    twin = _item(model=f"{MODEL}~length+50", instance="1", criterion="clarity", judge="good")
    assert original.replace("&", "&amp;") in pairs
    assert twin.replace("&", "&amp;") in pairs
    assert "4 items scored as the original and as its twin" in pairs


def test_length_stands_for_its_three_variants() -> None:
    assert pair_variants("length") == ("length+25", "length+50", "length+100")
    pairs = pairs_html(inputs(), "good", "length", item_href=_item)
    assert len(re.findall(r"<tr>", pairs)) == 5


def test_swap_pairs_show_both_orders_and_link_to_the_comparison() -> None:
    pairs = pairs_html(inputs(), "good", "swap", item_href=_item)
    assert "A won" in pairs and "B won" in pairs and ">no<" in pairs
    assert "pair=either" in pairs and "model_b=m2" in pairs
    assert "1 comparisons judged in both orders" in pairs


def test_self_pairs_show_every_judges_score() -> None:
    pairs = pairs_html(inputs(), "good", "self", item_href=_item)
    assert "fam-a" in pairs and "4.00" in pairs and "&lt;script&gt;" in pairs


@pytest.mark.parametrize(("judge", "key"), [("nobody", "style"), ("good", "nothing")])
def test_an_unknown_judge_or_key_is_refused(judge: str, key: str) -> None:
    assert "nothing" not in PAIR_KEYS
    with pytest.raises(ValueError, match=r"nobody|nothing"):
        pairs_html(inputs(), judge, key, item_href=_item)


def test_effect_helper_builds_what_the_card_shows() -> None:
    e = effect("j", "style", "style", 0.5)
    page = card_html(Card("r", (JudgeCard("j", (e,)),)))
    assert "0.500" in page and "[0.250, 0.750]" in page


def test_the_html_report_ends_with_the_judge_card() -> None:
    page = render(make_report(2), [], card=card(), pairs_href=_href)
    assert '<a href="#judge-card">Judge card</a>' in page
    section = page.split('<section id="judge-card">')[1]
    assert section.count("<section class='judge-card'") == 2
    assert "<script>alert" not in page
    assert "judge-card" not in render(make_report(2), [])
