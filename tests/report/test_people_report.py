"""People beside judges, end to end: a run's ledger with raters' rows (judge
``human/RATER``), reported as `flask-eval report` builds it, in every format; nothing
changes for a run without them; the time a rater spent never moves a figure."""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import Callable
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from flask_eval.app.report import NO_EXTRAS, Extras, build_report
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.report.document import Report
from flask_eval.report.ensemble import EnsembleSpec
from flask_eval.report.html import render as html_render
from flask_eval.report.people_data import Item
from flask_eval.report.render import to_json, to_table
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.records import OpenRow as Row
from flask_eval.storage.store import Store
from flask_eval.viewer import body as viewer_body
from flask_eval.viewer.server import make_app
from tests.conftest import EXAMPLES
from tests.report.ledger import Outcome, finish, judges, planned_run
from tests.report.test_golden import QUALITY, _responses, _score, _unit, _verdict

RATERS = ("alice", "bob", "carol")


def _rating(model: str, instance: str, criterion: str, rater: str) -> int | None:
    """A rater's score: the model's quality plus the rater's noise; some N/A."""
    u = _unit("rating", model, instance, criterion, rater)
    if u < 0.05:
        return None
    noise = (_unit("rater-noise", model, instance, criterion, rater) - 0.5) * 2.2
    return max(1, min(5, round(QUALITY[model] + noise)))


def _add_ratings(
    store: Store, run_id: int, rows: list[Row], score: Callable[..., int | None], seconds: float
) -> int:
    """Done rows of the raters on about half of the judged items (some by one rater,
    most by two or three), ``seconds`` spent on each; returns how many."""
    items = sorted({(r.model, r.model_b, r.instance_id, r.criterion) for r in rows})
    added = []
    for model, model_b, instance, criterion in items:
        if _unit("rated", model, model_b, instance, criterion) < 0.5:
            continue
        how_many = 1 + int(_unit("raters", model, instance, criterion) * 3)
        for rater in RATERS[:how_many]:
            value = json.dumps({"seconds": seconds, "source": "workspace"})
            added.append(
                {
                    "run_id": run_id,
                    "model": model,
                    "model_b": model_b,
                    "instance_id": instance,
                    "criterion": criterion,
                    "judge": f"human/{rater}",
                    "status": "done",
                    "score": score(model, model_b, instance, criterion, rater),
                    "value": value,
                }
            )
    with store.engine.begin() as conn:
        conn.execute(JUDGMENT.insert(), added)
    return len(added)


def _absolute_score(model: str, _b: str, instance: str, criterion: str, rater: str) -> int | None:
    return _rating(model, instance, criterion, rater)


def _pairwise_verdict(model: str, model_b: str, instance: str, _c: str, rater: str) -> int:
    d = QUALITY[model] - QUALITY[model_b] + (_unit("v", model, model_b, instance, rater) - 0.5) * 3
    return VERDICT_TIE if abs(d) < 0.3 else VERDICT_FIRST if d > 0 else VERDICT_SECOND


def _run(
    tmp_path: Path,
    name: str,
    outcome: Callable[[Row], Outcome],
    rate: Callable[..., int | None] | None = None,
    seconds: float = 12.5,
    extras: Extras = NO_EXTRAS,
    **plan: object,
) -> Report:
    store = Store(f"sqlite:///{tmp_path / f'{name}.db'}")
    run = planned_run(store, "people", **plan)
    rows = finish(store, run, outcome)
    if rate is not None:
        _add_ratings(store, run.id, rows, rate, seconds)
    report = build_report(store, run, replicates=200, seed=0, progress=False, extras=extras)
    store.close()
    return report


def _absolute(
    tmp_path: Path, name: str, rate: bool = True, seconds: float = 12.5, extras: Extras = NO_EXTRAS
) -> Report:
    models = ["gpt4", "alpaca_13b", "response-1"]
    return _run(
        tmp_path,
        name,
        _score,
        _absolute_score if rate else None,
        seconds,
        extras,
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=_responses(tmp_path, models),
        judges=judges("strict", "lenient"),
    )


def _href(item: Item) -> str:
    return viewer_body.judgments_url("people", **item.params())


def test_people_section_in_every_format(tmp_path: Path) -> None:
    report = _absolute(tmp_path, "rated")
    people = report.people
    assert people is not None and people.kind == "absolute"
    assert people.raters == [f"human/{r}" for r in RATERS]
    assert people.items_multi > 0 and people.items >= people.items_multi
    # people are no judges: the judges' tables, comparisons and agreement leave them out
    assert report.judges == ["strict", "lenient"]
    assert all(not r.judge.startswith("human/") for r in report.rows)
    assert all("human/" not in a.judge_a + a.judge_b for a in report.agreement)
    assert {v.judge for v in people.versus} == {"strict", "lenient"}
    dims = {(v.dimension, v.key) for v in people.versus}
    assert ("overall", "all") in dims and any(d == "ability" for d, _ in dims)
    assert any(d == "model" for d, _ in dims) and any(d == "skill" for d, _ in dims)
    alpha = [a for a in people.agreement if a.criterion == "all"]
    assert {a.metric for a in alpha} == {"ordinal", "interval"}
    assert all(a.alpha is not None and a.ci is not None for a in alpha)
    text = to_table(report)
    assert "\nPeople\n3 raters (alice, bob, carol)" in text
    assert "Agreement among people" in text and "Judges versus people" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    data = json.loads(to_json(report))
    assert data["people"]["raters"] == people.raters
    assert data["people"]["versus"][0]["pearson_ci"] is not None
    page = html_render(report, [], item_href=_href)
    assert '<section id="people"><h2>People</h2>' in page
    if people.disagreements:
        first = people.disagreements[0].item
        assert f"/runs/people/judgments?model={first.model}" in page
    body, _ = viewer_body.render(report)
    assert body["people"]["kind"] == "absolute"
    if people.disagreements:
        assert body["people"]["disagreements"][0]["href"].startswith("/runs/people/judgments?")


def test_no_people_no_section(tmp_path: Path) -> None:
    report = _absolute(tmp_path, "unrated", rate=False)
    assert report.people is None
    assert "people" not in json.loads(to_json(report))
    assert "People" not in to_table(report)
    assert 'id="people"' not in html_render(report, [])
    assert "people" not in viewer_body.render(report)[0]


def test_time_spent_moves_nothing(tmp_path: Path) -> None:
    """Two ledgers holding the same ratings, rated at different speeds: the same report
    (JSON and text, byte for byte); the judges' part is the report without the raters."""
    quick = _absolute(tmp_path, "quick", seconds=3.0)
    slow = _absolute(tmp_path, "slow", seconds=300.0)
    assert to_json(quick) == to_json(slow)
    assert to_table(quick) == to_table(slow)
    bare = _absolute(tmp_path, "bare", rate=False)
    without = json.loads(to_json(quick))
    del without["people"]
    plain = json.loads(to_json(bare))
    for key in ("rows", "comparisons", "agreement", "judges"):
        assert without[key] == plain[key]


def test_pairwise_people(tmp_path: Path) -> None:
    """A pairwise run rated by people: each judge's agreement with their majority."""
    models = ["gpt4", "response-1", "alpaca_13b"]
    report = _run(
        tmp_path,
        "pairwise",
        _verdict,
        _pairwise_verdict,
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=_responses(tmp_path, models),
        judges=judges("strict", "lenient"),
        pairwise="all",
    )
    people = report.people
    assert people is not None and people.kind == "pairwise"
    assert report.pairwise is not None and set(report.pairwise.judges) == {"strict", "lenient"}
    overall = [v for v in people.verdicts if v.dimension == "overall"]
    assert {v.judge for v in overall} == {"strict", "lenient"}
    assert all(v.agreement is not None and v.n_decisive <= v.n for v in overall)
    assert [a.metric for a in people.agreement if a.criterion == "all"] == ["nominal"]
    text = to_table(report)
    assert "agreement" in text and "without ties" in text
    page = html_render(report, [], item_href=_href)
    assert "people-verdicts" in page and "model_b=" in page


def test_run_page_shows_people_and_links_their_items(tmp_path: Path) -> None:
    """The viewer's run page: the People tables, each disagreement a link to the item's
    judgments (the judges' and the raters'), which the judgments page serves."""
    store = Store(f"sqlite:///{tmp_path / 'viewer.db'}")
    run = planned_run(
        store,
        "people",
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=_responses(tmp_path, ["gpt4", "alpaca_13b"]),
        judges=judges("strict", "lenient"),
        limit=12,
    )
    _add_ratings(store, run.id, finish(store, run, _score), _absolute_score, 5.0)
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(make_app(store)), loop=loop)
    loop.run_until_complete(client.start_server())

    def get(path: str) -> tuple[int, str]:
        async def go() -> tuple[int, str]:
            resp = await client.request("GET", path)
            return resp.status, await resp.text()

        return loop.run_until_complete(go())

    try:
        status, page = get("/runs/people?judge=strict")
        assert status == 200 and 'id="people-versus"' in page and 'id="people-alpha"' in page
        assert "human/" not in page.split('id="people"')[0]  # no rater among the judges
        links = re.findall(r'<a href="(/runs/people/judgments\?model=[^"]*instance=[^"]*)"', page)
        assert links, "no disagreement links"
        status, listed = get(html.unescape(links[0]))
        assert status == 200 and "human/" in listed
    finally:
        loop.run_until_complete(client.close())
        loop.close()
        store.close()


def test_ensembles_are_compared_with_people(tmp_path: Path) -> None:
    """A virtual judge of the report (an ensemble of the judges) stands against the people
    too; the people are no member of it."""
    report = _absolute(tmp_path, "ensemble", extras=Extras(ensembles=[EnsembleSpec("mean")]))
    assert report.people is not None
    judges = list(dict.fromkeys(v.judge for v in report.people.versus))
    assert judges[:2] == ["strict", "lenient"] and len(judges) == 3
    plain = _absolute(tmp_path, "plain")
    assert plain.people is not None
    same = {(v.judge, v.key): v.pearson for v in plain.people.versus}
    for v in report.people.versus:
        if v.judge in ("strict", "lenient"):
            assert same[(v.judge, v.key)] == v.pearson
