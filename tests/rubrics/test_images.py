"""Where a prompt's images go: after the shared prefix, in the user message, before the
instruction, for every protocol and both forms; a subject without images renders as
before (rubrics/images.py, producer/context.RunContext.prompt)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from flask_eval.core.images import Image, ImageRef
from flask_eval.core.types import JudgeConfig
from flask_eval.producer.context import RunContext
from flask_eval.rubrics.grading import Subject
from flask_eval.rubrics.images import with_images
from flask_eval.rubrics.messages import (
    ImagePart,
    Message,
    image_part,
    images_of,
    parts_of,
    prefix_end,
    shared_prefix,
    text_of,
)
from flask_eval.rubrics.skills import load_default

SKILLS = load_default()
CRITERIA = [SKILLS.get(n) for n in SKILLS.names[:3]]
SUBJECT = Subject(
    "How many red squares does the picture show?", "Three.", "I count three red squares."
)


def image(data: bytes, media_type: str = "image/png") -> Image:
    ref = ImageRef(hashlib.sha256(data).hexdigest(), media_type, 8, 6, len(data))
    return Image(ref, data)


PNG = image(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
JPEG = image(b"\xff\xd8\xff\xe0" + bytes(range(255, -1, -1)), "image/jpeg")


def context(protocol: str, *, structured: bool = False, pairwise: bool = False) -> RunContext:
    judge = JudgeConfig("j", "openai/gpt-4o", protocol=protocol, structured=structured)
    return RunContext(SKILLS, {"j": judge}, pairwise=pairwise)


def where_images(messages: list[Message]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, m in enumerate(messages)
        for j, p in enumerate(parts_of(m))
        if isinstance(p, ImagePart)
    ]


CASES = [
    ("flask-eval", False, False, 3),
    ("flask-eval", True, False, 3),  # the structured form
    ("flask", False, False, 3),
    ("prometheus", False, False, 1),
    ("flask-eval", False, True, 3),  # pairwise
]


@pytest.mark.parametrize(("name", "structured", "pairwise", "n"), CASES)
def test_images_follow_the_shared_prefix_and_change_no_text(
    name: str, structured: bool, pairwise: bool, n: int
) -> None:
    ctx = context(name, structured=structured, pairwise=pairwise)
    subject = replace(SUBJECT, response_b="Two." if pairwise else None)
    plain, schema = ctx.prompt("j", subject, CRITERIA[:n])
    shown, same_schema = ctx.prompt("j", replace(subject, images=(PNG, JPEG)), CRITERIA[:n])
    assert schema == same_schema
    assert [text_of(m) for m in shown] == [text_of(m) for m in plain]
    assert [images_of(m) for m in shown] == [[], [PNG, JPEG]]  # system, then user
    assert shared_prefix(shown) == shared_prefix(plain)  # the cacheable prefix is unchanged
    end = prefix_end(plain)
    assert end is not None and end[0] == 1
    assert where_images(shown) == [(1, end[1] + 1), (1, end[1] + 2)]
    # the instruction comes after the images
    after = "".join(p.text for p in parts_of(shown[1])[end[1] + 3 :])
    assert SUBJECT.instruction in after


def test_in_prometheus_the_image_sits_under_the_instruction_heading() -> None:
    shown, _ = context("prometheus").prompt("j", replace(SUBJECT, images=(PNG,)), CRITERIA[:1])
    parts = parts_of(shown[1])
    at = next(j for j, p in enumerate(parts) if isinstance(p, ImagePart))
    assert "".join(p.text for p in parts[:at]).endswith("###The instruction to evaluate:\n")
    assert parts[at + 1].text.startswith(SUBJECT.instruction)


@pytest.mark.parametrize(("name", "structured", "pairwise", "n"), CASES)
def test_a_subject_without_images_renders_as_before(
    name: str, structured: bool, pairwise: bool, n: int
) -> None:
    ctx = context(name, structured=structured, pairwise=pairwise)
    subject = replace(SUBJECT, response_b="Two." if pairwise else None)
    protocol = ctx.protocol_for("j")
    expected = (
        protocol.render_structured(subject, CRITERIA[:n])
        if structured
        else protocol.render(subject, CRITERIA[:n])
    )
    assert ctx.prompt("j", subject, CRITERIA[:n])[0] == expected


def test_with_images_without_a_shared_prefix_opens_the_first_user_message() -> None:
    messages: list[Message] = [
        {"role": "system", "content": "Judge."},
        {"role": "user", "content": "Count the squares."},
    ]
    placed = with_images(messages, [PNG])
    assert placed[0] == messages[0]
    assert placed[1]["content"] == (image_part(PNG), *parts_of(messages[1]))
    assert text_of(placed[1]) == "Count the squares."


def test_with_images_after_a_prefix_that_ends_in_the_system_message() -> None:
    from flask_eval.rubrics.messages import message

    messages: list[Message] = [message("system", "Judge."), message("user", "Count.")]
    messages[1] = {"role": "user", "content": "Count."}
    placed = with_images(messages, [PNG])
    assert where_images(placed) == [(1, 0)]


def test_with_images_leaves_a_rendering_that_holds_its_images_and_needs_a_user() -> None:
    own: list[Message] = [{"role": "user", "content": (image_part(JPEG),)}]
    assert with_images(own, [PNG]) == own  # the protocol placed them itself
    assert with_images([{"role": "user", "content": "x"}], []) == [{"role": "user", "content": "x"}]
    with pytest.raises(ValueError, match="user message"):
        with_images([{"role": "system", "content": "x"}], [PNG])
