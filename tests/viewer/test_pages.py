"""The viewer's pages as a user reads them, over runs written straight into a ledger (no
judge): a pairwise run's controlled figures, position consistency and ratings best
first; the runs list's models, judges, cost, duration and an evaluation's runs grouped;
the judgments' judge and failure-reason filters; the comparison's neighbours and the
instances where the judges disagree most; pages of an unfinished run that refresh."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import select, update

from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.models import CALL, JUDGMENT, RUN
from flask_eval.storage.records import OpenRow as Row
from flask_eval.storage.store import Store
from flask_eval.viewer.server import make_app
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval
from tests.report.ledger import Outcome, finish, planned_run
from tests.report.ledger import judges as ledger_judges

Get = Callable[[str], tuple[int, str]]


def _unit(*parts: object) -> float:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


QUALITY = {"a": 2, "b": 1, "c": 3}  # listed a, b, c; best first: c, a, b


def _verdict(row: Row) -> Outcome:
    """The better model wins 3 times in 4 (ties aside); the judge ``j1`` picks the
    response shown first half the time."""
    u = _unit(row.model, row.model_b, row.instance_id, row.judge)
    if row.judge == "j1" and u < 0.5:
        return "done", VERDICT_FIRST
    if _unit("tie", row.model, row.model_b, row.instance_id) < 0.1:
        return "done", VERDICT_TIE
    first_better = QUALITY[row.model] > QUALITY[row.model_b]
    upset = _unit("upset", row.model, row.model_b, row.instance_id, row.judge) < 0.25
    return "done", VERDICT_FIRST if first_better != upset else VERDICT_SECOND


def _absolute(row: Row) -> Outcome:
    """Scores where the judges disagree on instance 3 by 4 points, elsewhere by at most 1;
    j2 fails some rows, each for its own reason."""
    if row.judge == "j2" and row.id % 5 == 0:
        return "failed", None
    if row.instance_id == "3":
        return "done", 1 if row.judge == "j1" else 5
    return "done", 3 + (row.id % 2 if row.judge == "j2" else 0)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    tmp = tmp_path_factory.mktemp("pages")
    url = f"sqlite:///{tmp / 'store.db'}"
    store = Store(url)
    responses = [f"a={EXAMPLES / 'model_a.jsonl'}", f"b={EXAMPLES / 'model_b.jsonl'}"]
    common: dict[str, Any] = dict(
        instances=str(EXAMPLES / "instances.jsonl"), responses=responses, limit=10
    )
    c = tmp / "c.jsonl"  # a third model: b's answers, some with markdown
    answers = [json.loads(x) for x in (EXAMPLES / "model_b.jsonl").read_text().splitlines()]
    c.write_text(
        "".join(
            json.dumps({**x, "text": "**Answer.** " * (k % 2) + x["text"]}) + "\n"
            for k, x in enumerate(answers)
        )
    )
    pw = planned_run(
        store,
        "pw",
        judges=ledger_judges("j1", "j2"),
        pairwise="all",
        **{**common, "responses": [*responses, f"c={c}"], "limit": 20},
    )
    finish(store, pw, _verdict)
    priced = tmp / "judges.yaml"
    priced.write_text(
        "".join(
            f"- spec: openai/{j}\n  name: {j}\n  price: {{input: 1, output: 2}}\n"
            for j in ("j1", "j2")
        )
    )
    absolute = planned_run(store, "abs", judges_files=[str(priced)], **common)
    rows = finish(store, absolute, _absolute)
    with store.engine.begin() as conn:
        for r in rows:
            if r.judge == "j2" and r.id % 5 == 0:
                reason = "parse" if r.id % 2 else "refused"
                conn.execute(update(JUDGMENT).where(JUDGMENT.c.id == r.id).values(reason=reason))
        conn.execute(
            CALL.insert().values(
                uid="c1",
                cache_key="k1",
                run_id=absolute.id,
                judge="j1",
                raw="x",
                parsed=True,
                cost=0.25,
            )
        )
        created = conn.execute(select(RUN.c.created_at).where(RUN.c.id == absolute.id)).scalar_one()
        conn.execute(
            update(JUDGMENT)
            .where(JUDGMENT.c.run_id == absolute.id)  # 90 s long
            .values(updated_at=created + timedelta(seconds=90))
        )
    _evaluate(tmp, url)
    yield store
    store.close()


def _evaluate(tmp: Path, url: str) -> None:
    """`flask-eval eval` of two simulated models on 3 instances without FLASK's metadata:
    its generate, annotate and judge runs (the simulated judge has no price)."""
    bare = tmp / "bare.jsonl"
    lines = (EXAMPLES / "instances.jsonl").read_text().splitlines()[:3]
    bare.write_text(
        "".join(
            json.dumps({k: json.loads(x)[k] for k in ("idx", "instruction", "answer")}) + "\n"
            for x in lines
        )
    )
    with running_simulator(SimConfig(seed=3, generators={"m1": 2.0, "m2": 4.0})) as sim:
        env = cli_env(url, OPENAI_BASE_URL=sim.openai_base_url)
        flask_eval(
            "eval",
            "--instances",
            str(bare),
            "--judge",
            "judge=openai/judge",
            "--model",
            "m1=openai/m1",
            "--model",
            "m2=openai/m2",
            "--name",
            "ev",
            "--out",
            str(tmp / "out"),
            "--quiet",
            env=env,
        )


@contextmanager
def serving(store: Store) -> Iterator[Get]:
    """GET on the viewer of ``store``, in this thread's event loop."""
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(make_app(store)), loop=loop)
    loop.run_until_complete(client.start_server())

    def fetch(path: str) -> tuple[int, str]:
        async def go() -> tuple[int, str]:
            resp = await client.get(path)
            return resp.status, await resp.text()

        return loop.run_until_complete(go())

    try:
        yield fetch
    finally:
        loop.run_until_complete(client.close())
        loop.close()


@pytest.fixture
def get(store: Store) -> Iterator[Get]:
    with serving(store) as fetch:
        yield fetch


def _table(html: str, table_id: str) -> list[list[str]]:
    """The body rows of the table ``table_id`` as cell texts (tags stripped)."""
    found = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.S)
    assert found, f"no table #{table_id}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(1), re.S)
    return [
        [
            re.sub(r"<[^>]+>", "", c).strip()
            for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)
        ]
        for r in rows
    ]


def test_the_pairwise_page_shows_the_controlled_figures_position_and_ratings_best_first(
    get: Get,
) -> None:
    status, html = get("/runs/pw?judge=j2")
    assert status == 200
    ratings = _table(html, "ratings")
    assert [r[0] for r in ratings] == ["c", "a", "b"]  # best first, not as listed
    values = [float(r[1]) for r in ratings]
    assert values == sorted(values, reverse=True)
    controlled = _table(html, "controlled")
    assert sorted(r[0] for r in controlled) == ["a", "b", "c"]
    styled = [float(r[4]) for r in controlled]
    assert styled == sorted(styled, reverse=True)  # best style-controlled rating first
    anchor = next(r for r in controlled if r[0] == "a")
    assert anchor[2] == "0.500" and anchor[4] == "1000"  # a is the anchor
    assert all(re.fullmatch(r"0\.\d{3}", r[2]) for r in controlled)  # an LC win rate each
    assert "length-controlled win rate (AlpacaEval 2)" in html  # the note, with its figures
    position = _table(html, "position")
    assert [p[0] for p in position] == ["all"]
    assert 0.0 <= float(position[0][1]) <= 1.0 and position[0][3] == "60"  # 3 pairs x 20
    _, first = get("/runs/pw?judge=j1")
    assert float(_table(first, "position")[0][1]) < float(position[0][1])  # j1 is biased


def test_the_runs_list_shows_models_judges_cost_duration_and_an_evaluation_grouped(
    get: Get,
) -> None:
    status, html = get("/")
    assert status == 200
    head = re.search(r'<table[^>]*id="runs".*?<thead>(.*?)</thead>', html, re.S)
    assert head and all(h in head.group(1) for h in ("Models", "Judges", "Cost", "Duration"))
    rows = {r[0]: r for r in _rows(html, r'data-run="[^"]+"')}
    assert rows["abs"][3:5] == ["a, b", "j1, j2"] and rows["pw"][3] == "a, b, c"
    assert rows["abs"][9] == "$0.2500" and rows["abs"][10] == "1m 30s"
    assert rows["pw"][9] == "unknown"  # its judges have no price: not $0
    group = re.search(r'<tbody class="eval" data-eval="ev">(.*?)</tbody>', html, re.S)
    assert group, "the evaluation's runs are not grouped"
    steps = re.findall(r'data-run="ev-(generate|annotate|judge)-[0-9a-f]{10}"', group.group(1))
    assert steps == ["generate", "annotate", "judge"]
    ev = {r[2]: r for r in _rows(group.group(1), r'data-run="ev-')}
    assert ev["generate"][3] == "m1, m2" and ev["judge"][3:5] == ["m1, m2", "judge"]
    assert ev["annotate"][4] == "judge"  # the annotator
    assert all(r[9] == "unknown" for r in ev.values())  # the simulated judge has no price
    assert 'http-equiv="refresh"' not in html  # every run is finished: no reload


def _rows(html: str, marker: str) -> list[list[str]]:
    """The cells' texts of the rows whose <tr> matches ``marker``."""
    rows = re.findall(rf"<tr {marker}[^>]*>(.*?)</tr>", html, re.S)
    return [
        [
            re.sub(r"<[^>]+>", "", c).strip()
            for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)
        ]
        for r in rows
    ]


def test_judgments_filter_by_judge_and_failure_reason(get: Get) -> None:
    status, html = get("/runs/abs/judgments")
    assert status == 200
    judges = re.search(r'<select name="judge">(.*?)</select>', html, re.S)
    reasons = re.search(r'<select name="reason">(.*?)</select>', html, re.S)
    assert judges and re.findall(r"<option>(\w+)</option>", judges.group(1)) == ["j1", "j2"]
    assert reasons and re.findall(r'<option value="(\w+)"', reasons.group(1)) == [
        "parse",
        "refused",
    ]
    _, html = get("/runs/abs/judgments?judge=j2&reason=parse")
    lines = _rows(html, r'class="status-\w+"')
    assert lines and all(r[4] == "j2" and r[5] == "failed parse" for r in lines)
    assert "<option selected>j2</option>" in html  # the filter shown as chosen


def test_compare_walks_the_instances_and_lists_where_the_judges_disagree_most(get: Get) -> None:
    status, html = get("/runs/abs/compare?instance=2&a=a&b=b")
    assert status == 200
    assert 'id="previous" href="/runs/abs/compare?instance=10&amp;a=a&amp;b=b"' in html
    assert 'id="next" href="/runs/abs/compare?instance=3&amp;a=a&amp;b=b"' in html
    apart = _table(html, "disagreements")
    assert apart[0][:2] == ["3", "4"]  # j1 gave 1 and j2 gave 5 on instance 3
    assert all(float(r[1]) <= 1 for r in apart[1:])
    largest = [float(r[1]) for r in apart]
    assert largest == sorted(largest, reverse=True)
    _, first = get("/runs/abs/compare?instance=1&a=a&b=b")
    assert 'id="previous"' not in first and 'id="next"' in first
    _, pairwise = get("/runs/pw/compare?instance=1&a=a&b=b")
    assert 'id="disagreements"' not in pairwise  # no absolute scores to compare


def test_pages_of_a_run_being_judged_reload_until_it_is_done(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'live.db'}")
    try:
        run = planned_run(
            store,
            "live",
            instances=str(EXAMPLES / "instances.jsonl"),
            responses=[f"a={EXAMPLES / 'model_a.jsonl'}"],
            judges=ledger_judges("j1"),
            limit=4,
        )
        finish(store, run, lambda row: ("done", 3) if row.id % 2 else None)
        refresh = re.compile(r'<meta http-equiv="refresh" content="(\d+)">')
        with serving(store) as get:
            for path in ("/", "/runs/live"):
                found = refresh.search(get(path)[1])
                assert found and 0 < int(found.group(1)) <= 10, path
            finish(store, run, lambda row: ("done", 3))
            for path in ("/", "/runs/live"):
                assert not refresh.search(get(path)[1]), path
    finally:
        store.close()


def test_a_run_of_repeated_judgments_shows_each_judges_self_consistency(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'samples.db'}")
    try:
        run = planned_run(
            store,
            "twice",
            instances=str(EXAMPLES / "instances.jsonl"),
            responses=[f"a={EXAMPLES / 'model_a.jsonl'}"],
            judges=ledger_judges("j1"),
            samples=2,
            limit=6,
        )
        # sample 2 agrees with sample 1 on the even instances only
        finish(
            store,
            run,
            lambda row: (
                "done",
                3 if row.judge.endswith("#1") or int(row.instance_id) % 2 == 0 else 4,
            ),
        )
        with store.engine.begin() as conn:  # as `run --samples 2` records it
            conn.execute(
                update(RUN)
                .where(RUN.c.id == run.id)
                .values(config=json.dumps({**run.config.to_data(), "samples": 2}))
            )
        with serving(store) as get:
            status, html = get("/runs/twice")
        assert status == 200
        [row] = _table(html, "self-consistency")
        assert row[:3] == ["j1", "2", str(3 * 6)]  # 3 criteria of 6 instances, both samples
        assert row[3] == "0.500"  # half the items scored alike
    finally:
        store.close()


def test_a_run_about_instances_alone_has_no_responses_to_compare(get: Get) -> None:
    """A generation run's rows hold no model: its compare page says there is nothing to
    compare instead of comparing the empty name with itself."""
    _, html = get("/")
    name = re.findall(r'data-run="(ev-generate-[0-9a-f]{10})"', html)[0]
    status, page = get(f"/runs/{name}/compare")
    assert status == 400 and "responses to compare" in page and "holds no model" in page
