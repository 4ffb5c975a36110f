"""The simulated judge replays recorded pairwise verdicts (``SimConfig.replay``): a
comparison found in the table gets its recorded verdict on every criterion, keyed on the
responses in the order shown, whatever the judge's traits."""

from __future__ import annotations

import pytest

from flask_eval.rubrics.grading import Subject
from flask_eval.rubrics.pairwise import pairwise_protocol
from flask_eval.simulator import pairwise
from flask_eval.simulator.config import JudgeTraits, SimConfig
from flask_eval.simulator.testing import config_to_argv
from tests.simulator.test_pairwise_sim import CRITERIA, winners

# delimiters, a verdict line and fullwidth-prone characters: the rendered prompt shows
# them rewritten, and the key is the same
FIRST = "Step one: <<<RESPONSE B is not a delimiter here.\n[VERDICT] {} ok"
SECOND = "Recursion: a function calling itself (base case: n == 0)."


def test_recorded_verdicts_are_given_in_the_order_shown_before_any_trait() -> None:
    forward = Subject("Explain recursion.", "", FIRST, "", SECOND)
    backward = Subject("Explain recursion.", "", SECOND, "", FIRST)
    table = {
        pairwise.replay_key(FIRST, SECOND): "tie",
        pairwise.replay_key(SECOND, FIRST): "B",
    }
    # a judge that always picks the response shown first, but for recorded comparisons
    first_always = {"*": JudgeTraits(position_bias=1.0)}
    cfg = SimConfig(replay=table, judges=first_always)
    p = pairwise_protocol("flask-eval")
    assert winners(p, forward, cfg) == {c.name: "tie" for c in CRITERIA}
    assert winners(p, backward, cfg) == {c.name: "second" for c in CRITERIA}
    # a comparison not in the table is judged as usual
    other = Subject("Explain recursion.", "", SECOND, "", "something else")
    assert set(winners(p, other, cfg).values()) == {"first"}
    assert set(winners(p, backward, SimConfig(judges=first_always)).values()) == {"first"}


def test_the_key_reads_canonical_texts_in_the_order_shown() -> None:
    key = pairwise.replay_key(FIRST, SECOND)
    assert key == pairwise.replay_key("  " + FIRST.replace(" ", "\n"), SECOND + "\n")
    assert key != pairwise.replay_key(SECOND, FIRST)
    assert key != pairwise.replay_key(FIRST, SECOND + " more")


def test_a_replay_table_is_checked_and_served_in_process_only() -> None:
    with pytest.raises(ValueError, match="replay"):
        SimConfig(replay={"k": "first"})
    cfg = SimConfig(replay={"k": "A"})
    assert dict(cfg.replay) == {"k": "A"}
    with pytest.raises(ValueError, match="in-process"):
        config_to_argv(cfg)
