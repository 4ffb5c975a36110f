"""A turn of a conversation is asked as a chat: the earlier user turns, each followed by
the model's own answer as an assistant message, then the turn (rubrics/generation.py)."""

from __future__ import annotations

import pytest

from flask_eval.core.conversations import Turn
from flask_eval.rubrics.generation import GenerationProtocol, response_skillset
from flask_eval.rubrics.grading import Subject
from flask_eval.rubrics.messages import plain


def _render(subject: Subject) -> list[dict[str, str]]:
    protocol = GenerationProtocol("instance")
    return plain(protocol.render(subject, list(response_skillset())))


def test_turn_three_is_the_chat_so_far_with_the_models_own_answers() -> None:
    subject = Subject(
        instruction="And in winter?",
        reference="never shown",
        response="",
        system_prompt="Be brief.",
        history=(Turn("Where to go in Hawaii?", "ref 1"), Turn("And in spring?", "ref 2")),
        answers=("Maui.", "Kauai."),
    )
    assert _render(subject) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Where to go in Hawaii?"},
        {"role": "assistant", "content": "Maui."},
        {"role": "user", "content": "And in spring?"},
        {"role": "assistant", "content": "Kauai."},
        {"role": "user", "content": "And in winter?"},
    ]


def test_a_first_turn_is_one_user_message() -> None:
    subject = Subject(instruction="Hello", reference="", response="")
    assert _render(subject) == [{"role": "user", "content": "Hello"}]


def test_an_empty_earlier_answer_is_still_the_models_answer() -> None:
    subject = Subject(
        instruction="t2", reference="", response="", history=(Turn("t1"),), answers=("",)
    )
    assert _render(subject)[1] == {"role": "assistant", "content": ""}


@pytest.mark.parametrize("answers", [(), ("a1", "a2")])
def test_a_turn_without_exactly_its_earlier_answers_is_never_rendered(
    answers: tuple[str, ...],
) -> None:
    subject = Subject(
        instruction="t2", reference="", response="", history=(Turn("t1"),), answers=answers
    )
    with pytest.raises(ValueError, match="earlier turns"):
        _render(subject)
