"""A call its protocol refuses to render (a generation turn asked without the model's
answers to its earlier turns: rubrics/generation.py) fails its rows as ``config``, with
the reason, and the other calls of the same message are answered (workers/runner.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from flask_eval.app import steps
from flask_eval.app.turns import whole_plan
from flask_eval.core.conversations import Turn, turn_id
from flask_eval.core.settings import Settings
from flask_eval.core.types import Instance, JudgeConfig
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.store import Store


def test_a_turn_without_its_earlier_answers_fails_alone_as_config(sqlite_url: str) -> None:
    # turn 2 planned as a round-1 instance: no answer of the model's is held for turn 1
    turn_two = Instance(
        turn_id("81", 2),
        "Now rewrite it.",
        "",
        (),
        (),
        None,
        turn=2,
        conversation="81",
        history=(Turn("Plan a trip."),),
    )
    one_shot = Instance("7", "Name three primes.", "", (), (), None)
    with running_simulator(SimConfig(generators={"m": 3.0}, generation_tokens=30)) as sim:
        model = JudgeConfig("m", f"openai/m@{sim.openai_base_url}")
        plan = whole_plan([turn_two, one_shot], [model], "hand-made", "refused")
        settings = Settings(sqlite_url, None)
        store = Store(sqlite_url)
        try:
            dispatcher = steps.dispatcher_for(settings, store, plan.judges, 8)
            with pytest.raises(steps.StepIncomplete, match="config: 1"):
                steps.execute(plan, store, dispatcher, settings, verb="generate")
            with store.engine.connect() as conn:
                rows = {
                    r.instance_id: r
                    for r in conn.execute(
                        select(
                            JUDGMENT.c.instance_id,
                            JUDGMENT.c.status,
                            JUDGMENT.c.reason,
                            JUDGMENT.c.detail,
                        )
                    )
                }
        finally:
            store.close()
        assert sim.stats()["requests"] == 1  # the one-shot instance alone was asked
    assert rows["7"].status == "done"
    refused = rows["81:t2"]
    assert refused.status == "failed" and refused.reason == "config"
    assert "cannot be rendered" in refused.detail and "earlier turns" in refused.detail
