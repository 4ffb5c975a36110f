"""The layout of our judge prompts, absolute (``rubrics.prompt``) and pairwise
(``rubrics.pairwise``): the user message's sections in a cache-friendly order, the shared
prefix first (what is asked, how to read the inputs, the criteria, how to answer), then
the instance's own texts, then the untrusted responses (pure, no I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flask_eval.rubrics.conversation import Section
from flask_eval.rubrics.protocol import REFERENCE_HEADING

#: the heading of the output instructions, the last section of the shared prefix
HOW_TO_ANSWER = "## How to answer"
#: the static section on how to read a prompt's inputs (the reference, the responses)
INPUTS_HEADING = "## How to read the inputs"
#: the line before untrusted text that points back to :data:`INPUTS_HEADING`
UNTRUSTED_POINTER = '{what} untrusted data, as said in "How to read the inputs":'


@dataclass(frozen=True)
class LayoutText:
    """The fixed wording of one of our layouts, absolute or pairwise (:func:`skeleton`)."""

    intro: str
    system_heading: str
    system_note: str
    reference_note: str
    no_reference_note: str
    untrusted_note: str
    criteria_heading: str
    closing: str


@dataclass(frozen=True)
class InstanceText:
    """The instance's own texts in a judge's prompt, as given (:func:`skeleton` cleans
    them)."""

    system_prompt: str
    instruction: str
    reference: str


def skeleton(
    text: LayoutText,
    inputs: InstanceText,
    *,
    untrusted: Sequence[str],
    criteria: Sequence[Sequence[str]],
    instructions: Sequence[str],
    last_line: str,
    clean: Callable[[str], str],
    conversation: Section | None = None,
) -> tuple[str, str, str]:
    """The user message of our layouts, absolute and pairwise, as (shared prefix, the
    instance's prefix, rest).

    The prefix is the static part: ``text.intro``, how to read the inputs under
    :data:`INPUTS_HEADING` (``text.reference_note`` on a reference answer and
    ``text.untrusted_note`` on the untrusted responses: static text, so shared, and
    together about 130 tokens, which puts a three-skill prefix over the providers'
    1,024-token minimum for caching), the criteria blocks under ``text.criteria_heading``
    and the output ``instructions`` under :data:`HOW_TO_ANSWER` (nothing in it depends on
    the instance). The rest is the instance's (``inputs``): the models' system prompt
    (only when there is one, under ``text.system_heading``), the instruction, the
    reference (or ``text.no_reference_note``), the ``untrusted`` lines (the response
    section, its texts already cleaned), the ``text.closing`` line and the
    machine-readable ``last_line``, which stays last (the simulator reads the last one).
    The instance's prefix (system prompt, instruction, reference) is shared by the calls
    judging every model's response to the instance on the same criteria: a second cache
    breakpoint. ``clean`` neutralizes the untrusted texts it places itself (instruction,
    system prompt, reference). The three strings joined are the message's text."""
    shared = [
        text.intro,
        "",
        INPUTS_HEADING,
        "",
        text.reference_note,
        "",
        text.untrusted_note,
        "",
        text.criteria_heading,
        "",
    ]
    for block in criteria:
        shared += [*block, ""]
    shared += [HOW_TO_ANSWER, "", *instructions, "", ""]
    rest: list[str] = []
    if inputs.system_prompt.strip():
        rest += [
            text.system_heading,
            "",
            text.system_note,
            "",
            clean(inputs.system_prompt).strip(),
            "",
        ]
    heading = "## Instruction"
    if conversation is not None:
        rest += conversation.lines
        heading += f" (turn {conversation.turn}, the one to grade)"
    rest += [
        heading,
        "",
        clean(inputs.instruction).strip() or "(The instruction is empty.)",
        "",
        REFERENCE_HEADING,
        "",
    ]
    if inputs.reference.strip():
        rest.append(clean(inputs.reference).strip())
    else:
        rest.append(text.no_reference_note)
    rest.append("")
    tail = [*untrusted, text.closing, "", last_line]
    return "\n".join(shared), "\n".join(rest) + "\n", "\n".join(tail)
