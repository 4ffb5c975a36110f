"""A judge card and its inputs built by hand, for the card's renderers and the viewer's
card pages: two judges (one with a hostile name), twins of two variants, an order swap and
self-preference; :func:`fake_reader` stands in for the card's reader (the module
:data:`flask_eval.viewer.server.PROBE_CARD` names)."""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

from sqlalchemy import update

from flask_eval.report.probe_types import (
    Card,
    CardInputs,
    Effect,
    JudgeCard,
    JudgeOps,
    OrderedVerdicts,
    OwnScore,
    PeopleAgreement,
    TwinScore,
)
from flask_eval.storage.models import JUDGMENT, RESPONSE
from flask_eval.storage.records import OpenRow as Row
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from tests.conftest import EXAMPLES
from tests.report.ledger import finish, planned_run
from tests.report.ledger import judges as ledger_judges

HOSTILE = "<script>alert(1)</script>&\"'"
JUDGES = ("good", HOSTILE)
MODEL = "m<b>1"


def inputs(run: str = "probed", judges: tuple[str, ...] = JUDGES) -> CardInputs:
    """Twins of ``length+50`` and ``style`` of two models on instances 1 and 2, both
    judges; a comparison judged in both orders; one response scored by both judges."""
    twins = tuple(
        TwinScore(judge, variant, model, instance, "clarity", 3.0, 3.0 + bump, 100, 150)
        for judge in judges
        for variant, bump in (("length+50", 1.0), ("style", 0.0))
        for model in (MODEL, "m2")
        for instance in ("1", "2")
    )
    verdicts = tuple(
        OrderedVerdicts(judge, "", "1", "clarity", MODEL, "m2", 1.0, 0.0) for judge in judges
    )
    own = (OwnScore(MODEL, "1", "clarity", {j: 4.0 for j in judges}),)
    return CardInputs(
        run=run,
        judges=judges,
        twins=twins,
        verdicts=verdicts,
        own=own,
        families={MODEL: "fam-a", judges[0]: "fam-a"},
    )


def effect(judge: str, probe: str, key: str, estimate: float, **more: Any) -> Effect:
    return Effect(
        judge=judge,
        probe=probe,
        measure="score change",
        estimate=estimate,
        low=estimate - 0.25,
        high=estimate + 0.25,
        p_value=more.pop("p_value", 0.0004),
        significant=more.pop("significant", True),
        items=8,
        clusters=2,
        pairs_key=(judge, key),
        **more,
    )


def card(run: str = "probed", judges: tuple[str, ...] = JUDGES) -> Card:
    """Three effects per judge (length failing its gate), ops and people for the first."""
    cards = []
    for n, judge in enumerate(judges):
        effects = (
            effect(judge, "length+50", "length+50", 0.875, gate=0.5, fails=True),
            effect(judge, "style", "style", 0.0, p_value=0.62, significant=False),
            effect(judge, "swap", "swap", -0.3125),
        )
        ops = JudgeOps(judge, 40, 2, 1, 0, 812.0, 0.00042) if n == 0 else None
        people = PeopleAgreement(judge, 12, 0.71, 0.68, 0.9) if n == 0 else None
        notes = (f"self: no model of another family than {judge}",)
        cards.append(JudgeCard(judge, effects, 0.75, ops, people, notes))
    return Card(run, tuple(cards), gate={"length+50": 0.5})


def fake_reader(
    judges: tuple[str, ...] = JUDGES, read: CardInputs | None = None
) -> types.ModuleType:
    """A stand-in for the card's reader that reads :func:`card` of the run asked for and
    ``read`` (else :func:`inputs`), whatever the store holds."""
    module = types.ModuleType("flask_eval.app.probe_card")

    def load_card(store: object, run_name: str, *, gate: object = None) -> Card:
        return card(run_name, judges)

    def load_card_inputs(store: object, run_name: str) -> CardInputs:
        return read if read is not None else inputs(run_name, judges)

    module.load_card = load_card  # type: ignore[attr-defined]
    module.load_card_inputs = load_card_inputs  # type: ignore[attr-defined]
    return module


#: the twin the probed run holds: model b's responses renamed as model a's twin
TWIN = "a~length+50"


def probed_run(store: Store, name: str, judge: str = "good") -> tuple[RunInfo, list[Row]]:
    """A run of models a and ``a~length+50`` (model b's responses, renamed after planning:
    a user's model never has ``~``) on 3 instances, every row scored; and its rows."""
    run = planned_run(
        store,
        name,
        instances=str(EXAMPLES / "instances.jsonl"),
        responses=[f"a={EXAMPLES / 'model_a.jsonl'}", f"b={EXAMPLES / 'model_b.jsonl'}"],
        judges=ledger_judges(judge),
        limit=3,
    )
    with store.engine.begin() as conn:
        for table in (RESPONSE, JUDGMENT):
            conn.execute(
                update(table)
                .where(table.c.run_id == run.id, table.c.model == "b")
                .values(model=TWIN)
            )
    rows = finish(store, run, lambda r: ("done", 4 if r.model == TWIN else 3))
    return run, rows


def inputs_of(run: str, rows: Sequence[Row], judge: str = "good") -> CardInputs:
    """The card's inputs of :func:`probed_run`'s rows: each item of a and its twin."""
    scores = {(r.model, r.instance_id, r.criterion): r for r in rows if r.judge == judge}
    twins = tuple(
        TwinScore(judge, "length+50", "a", instance, criterion, 3.0, 4.0, 100, 150)
        for (model, instance, criterion) in scores
        if model == "a" and (TWIN, instance, criterion) in scores
    )
    return CardInputs(run=run, judges=(judge,), twins=twins)
