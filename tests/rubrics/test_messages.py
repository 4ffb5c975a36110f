"""Messages as parts: the shared prefix each protocol marks, and the plain text around it."""

from __future__ import annotations

import pytest

from flask_eval.rubrics.grading import PROTOCOLS, Protocol, Subject, protocol
from flask_eval.rubrics.messages import (
    Message,
    Part,
    plain,
    prefix_end,
    shared_prefix,
    split_prefix,
    text_of,
)
from flask_eval.rubrics.pairwise import PAIRWISE_PROTOCOLS, pairwise_protocol
from flask_eval.rubrics.skills import Skill, load_default
from flask_eval.workers.context import cache_key
from flask_eval.workers.judge import GenerateConfig

SKILLS = load_default()
A = [SKILLS.get(n) for n in ("Readability", "Factuality")]
B = [SKILLS.get(n) for n in ("Readability", "Harmlessness")]
ONE, OTHER = [SKILLS.get("Readability")], [SKILLS.get("Factuality")]

FIRST = Subject("What is 2+2?", "4", "Four.", system_prompt="Be brief.")
SECOND = Subject("Name a prime.", "7", "Seven.")
UNREFERENCED = Subject("Name a prime.", "", "Seven.")
PAIR_1 = Subject("What is 2+2?", "4", "Four.", response_b="5")
PAIR_2 = Subject("Name a prime.", "7", "Seven.", system_prompt="Be kind.", response_b="Nine")


def test_text_is_the_parts_joined_and_a_string_is_one_unmarked_part() -> None:
    m: Message = {"role": "user", "content": (Part("static ", True), Part("instance"))}
    assert text_of(m) == "static instance"
    assert plain([m, {"role": "assistant", "content": "hi"}]) == [
        {"role": "user", "content": "static instance"},
        {"role": "assistant", "content": "hi"},
    ]
    assert split_prefix([{"role": "system", "content": (Part("S", True),)}, m]) == (
        "S\n\nstatic ",
        "instance",
    )
    assert split_prefix([{"role": "user", "content": "all of it"}]) == ("", "all of it")
    assert prefix_end([{"role": "user", "content": "x"}]) is None
    assert shared_prefix([m]) == [{"role": "user", "content": (Part("static ", True),)}]


# Each case: the protocol, two subjects, criteria, other criteria, and whether the
# prefix holds the criteria (Prometheus's trained layouts put them after the response).
CASES = [
    ("flask-eval", protocol("flask-eval"), FIRST, SECOND, A, B, True),
    ("flask-eval skill mode", protocol("flask-eval", "skill"), FIRST, SECOND, ONE, OTHER, True),
    ("flask", protocol("flask"), FIRST, SECOND, A, B, True),
    ("prometheus", protocol("prometheus"), FIRST, SECOND, ONE, OTHER, False),
    ("pairwise flask-eval", pairwise_protocol("flask-eval"), PAIR_1, PAIR_2, A, B, True),
    ("pairwise prometheus", pairwise_protocol("prometheus"), PAIR_1, PAIR_2, ONE, OTHER, False),
]


@pytest.mark.parametrize(
    ("proto", "first", "second", "criteria", "others", "holds_criteria"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_every_protocol_shares_one_prefix_across_instances_with_the_same_criteria(
    proto: Protocol,
    first: Subject,
    second: Subject,
    criteria: list[Skill],
    others: list[Skill],
    holds_criteria: bool,
) -> None:
    one, two = proto.render(first, criteria), proto.render(second, criteria)
    shared, rest = split_prefix(one)
    assert shared and shared == split_prefix(two)[0]
    assert shared_prefix(one) == shared_prefix(two)
    for text in (first.instruction, first.response):  # nothing of the instance is shared
        assert text not in shared and text in rest
    changed = split_prefix(proto.render(first, others))[0]
    assert (changed != shared) is holds_criteria
    if holds_criteria:
        assert all(c.criterion in shared for c in criteria)


def test_the_structured_form_shares_its_own_prefix() -> None:
    proto = protocol("flask-eval")
    one = proto.render_structured(FIRST, A)
    shared = split_prefix(one)[0]
    assert shared == split_prefix(proto.render_structured(SECOND, A))[0]
    assert shared != split_prefix(proto.render(FIRST, A))[0]  # its own answer format
    assert "one JSON object and nothing else" in shared


def test_prometheus_shares_what_its_trained_layout_puts_first() -> None:
    """The system prompt and the task description up to the instruction's heading; the
    description differs with and without a reference, as upstream's two templates do."""
    proto = protocol("prometheus")
    shared = split_prefix(proto.render(FIRST, ONE))[0]
    assert shared.endswith("###The instruction to evaluate:\n")
    assert shared != split_prefix(proto.render(UNREFERENCED, ONE))[0]


def test_every_protocol_says_what_it_shares() -> None:
    for cls in [*PROTOCOLS.values(), *PAIRWISE_PROTOCOLS.values()]:
        assert isinstance(cls.shares, str) and cls.shares.strip(), cls


@pytest.mark.parametrize("name", ["flask", "prometheus"])
def test_marking_the_prefix_leaves_a_trained_layouts_cache_key_as_it_was(name: str) -> None:
    """The key hashes the plain text: a trained layout's text is unchanged, so are its
    keys (answers cached before prompts had parts are still found)."""
    messages = protocol(name).render(FIRST, ONE)
    config = GenerateConfig()
    assert prefix_end(messages) is not None
    assert cache_key("j", messages, config) == cache_key("j", plain(messages), config)  # type: ignore[arg-type]


def test_messages_survive_the_ledger_as_json() -> None:
    """A parked batch call keeps its rendering as JSON: read back, it is the same call,
    breakpoints included (an Anthropic batch marks the same prefixes as a live call)."""
    import json

    from flask_eval.rubrics.grading import Subject, protocol
    from flask_eval.rubrics.messages import from_data, to_data
    from flask_eval.rubrics.skills import load_default

    skills = load_default()
    rendered = protocol("flask-eval").render(
        Subject("Say hi.", "Hi.", "Hello!"), [skills.get(n) for n in skills.names[:3]]
    )
    rendered.append({"role": "assistant", "content": "a plain turn"})
    assert from_data(json.loads(json.dumps(to_data(rendered)))) == rendered
    with pytest.raises(ValueError):
        from_data([{"role": "user", "content": [["text", True]]}])
