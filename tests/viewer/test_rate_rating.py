"""What a rating page shows (``app.rating.build_page``) and how a posted form is read,
over a SQLite store's runs and rating items; and the raters' tokens
(``app.rater_tokens``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from flask_eval.app import rater_tokens, rating
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.rubrics import codec
from flask_eval.rubrics.grading import FlaskEvalProtocol
from tests.viewer import rate_setup
from tests.viewer.rate_setup import Runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    found = rate_setup.make_runs(tmp_path_factory.mktemp("rating"))
    yield found
    found.store.close()


def test_an_absolute_page_shows_the_instance_and_each_criterions_rubric(runs: Runs) -> None:
    item = runs.get(runs.item("page", "1"))
    page = rating.build_page(runs.store, item)
    instance = runs.store.instances(runs.absolute.id, ["1"])["1"]
    assert page.item_id == item.id and not page.pairwise
    assert page.instruction == instance.instruction
    assert page.system_prompt == rate_setup.SYSTEM_PROMPT
    assert page.reference == instance.answer  # our protocol shows the reference
    assert page.responses == (rate_setup.HOSTILE,)
    assert [c.name for c in page.criteria] == list(instance.skills)
    skills = codec.from_data(runs.absolute.config.skills)  # the run's criteria
    for c in page.criteria:
        assert c.scale == (1, 2, 3, 4, 5)
        assert c.allow_na == skills.get(c.name).allow_na
        if c.name == "Logical Correctness":  # the instance's own rubric first
            assert c.levels[-1] == rating.Level(5, rate_setup.RUBRIC_TEXT)
        else:
            assert [lv.text for lv in c.levels] == list(skills.get(c.name).rubric.values())
    assert rating.build_page(runs.store, runs.get(runs.item("page", "2"))).system_prompt == ""


@pytest.mark.parametrize("swapped", [False, True])
def test_a_pairwise_page_shows_two_responses_in_the_items_order(runs: Runs, swapped: bool) -> None:
    item = runs.get(runs.item(f"pair-{swapped}", "1", pairwise=True, swapped=swapped))
    assert item.swapped is swapped
    page = rating.build_page(runs.store, item)
    assert page.pairwise and len(page.responses) == 2
    assert (page.responses[0] == rate_setup.HOSTILE) is not swapped
    assert all(c.scale == () and not c.allow_na for c in page.criteria)
    form = {c.field: "1" for c in page.criteria} | {"r0": " why "}
    scores, notes = rating.parse_form(page, swapped, form)
    assert set(scores.values()) == {VERDICT_SECOND if swapped else VERDICT_FIRST}
    assert notes == {page.criteria[0].name: "why"}
    scores, _ = rating.parse_form(page, swapped, {c.field: "tie" for c in page.criteria})
    assert set(scores.values()) == {VERDICT_TIE}
    with pytest.raises(rating.FormError) as caught:
        rating.parse_form(page, swapped, {c.field: "3" for c in page.criteria})
    assert set(caught.value.problems) == {c.field for c in page.criteria}


def test_an_item_whose_instance_is_gone(runs: Runs) -> None:
    item = runs.get(runs.item("gone", "1"))
    with pytest.raises(rating.ItemGone):
        rating.build_page(runs.store, replace(item, instance_id="no-such-instance"))


def test_na_only_where_the_criterion_allows_it(runs: Runs) -> None:
    page = rating.build_page(runs.store, runs.get(runs.item("na", "2")))
    for c in page.criteria:
        form = {d.field: "3" for d in page.criteria} | {c.field: rating.NA}
        if c.allow_na:
            assert rating.parse_form(page, False, form)[0][c.name] is None
        else:
            with pytest.raises(rating.FormError, match="N/A is not allowed"):
                rating.parse_form(page, False, form)


def test_time_spent_is_measured_from_when_the_item_was_served() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert rating.seconds_since(now - timedelta(seconds=42.5), now) == 42.5
    assert rating.seconds_since((now - timedelta(seconds=3)).replace(tzinfo=None), now) == 3
    assert rating.seconds_since(now + timedelta(seconds=3), now) == 0  # a clock gone back
    assert rating.seconds_since(None, now) == 0


def test_the_protocol_probe_sees_what_our_protocol_shows() -> None:
    assert rating._probe(FlaskEvalProtocol, "instance", False) == (True, True)


def test_tokens_are_random_hashed_and_compared_in_constant_time() -> None:
    tokens = {rater_tokens.new_token() for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) >= 43 for t in tokens)
    token = tokens.pop()
    hashed = rater_tokens.hash_token(token)
    assert len(hashed) == 64 and int(hashed, 16) >= 0 and token not in hashed
    assert rater_tokens.same(hashed, rater_tokens.hash_token(token))
    assert not rater_tokens.same(hashed, rater_tokens.hash_token(token + "x"))
    assert not rater_tokens.same("a", "\udc80")  # a lone surrogate compares, never raises


def test_the_scale_is_the_rubrics_levels_where_the_protocol_shows_them() -> None:
    from flask_eval.rubrics.grading import protocol
    from flask_eval.rubrics.skills import Skill

    ten = Skill("Depth", "Depth", "how deep", {k: f"level {k}" for k in range(1, 11)})
    five = Skill("Depth", "Depth", "how deep", {k: f"level {k}" for k in range(1, 6)})
    bare = Skill("Depth", "Depth", "how deep", {})
    ours = protocol("flask-eval")
    assert rating.scale_of(ours, ten) == tuple(range(1, 11))
    assert rating.scale_of(ours, five) == (1, 2, 3, 4, 5)
    assert rating.scale_of(ours, bare) == ours.scale.levels
