"""Generation: the models under test answer the instances (pure).

A generation run asks each model under test for its response to each instance, so that
a judgment run can then grade those responses. It reuses the judgment machinery (the
planner, the executor, the ledger) through the :class:`~rubrics.grading.Protocol` seam:
a generation row is one more row with one criterion, :data:`RESPONSE`, whose answer is
kept as text in ``Reading.values`` instead of being read into a score.

The model under test must see the task as a user would write it, so nothing is added to
it: no wrapper, no delimiters, no neutralized markers (an instruction that contains
``[SCORES]`` is sent with ``[SCORES]`` in it). Only the instance's own system prompt, when
it has one (BiGGen's instances do), goes before it as a system message. Every text the
model writes is a response, even an empty one: judging it is the next run's work.

A turn of a conversation (``core.conversations``) is asked as a chat: the earlier user
turns, each followed by the model's own answer to it as an assistant message, then the
turn. ``app.turns`` plans the turns in order, so that those answers exist when the turn
is asked (docs/design/conversations.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flask_eval.rubrics.grading import Criterion, Protocol, Subject
from flask_eval.rubrics.kind import Kind, Words, instance_record
from flask_eval.rubrics.messages import Message, Part, message
from flask_eval.rubrics.parse import Reading
from flask_eval.rubrics.skills import Skill, SkillSet

#: the one criterion of a generation row: the model's response to the instance
RESPONSE = "response"
#: the group (``Skill.ability``) of :data:`RESPONSE`
GENERATION_ABILITY = "generation"

#: the expected length of a generated response, in tokens, for cost estimates made
#: before anything is spent. Chat models answer instruction-following sets with a few
#: hundred tokens (AlpacaEval 2's leaderboard lists average outputs of roughly 1,500 to
#: 2,500 characters, about 400 to 600 tokens); a request's ``max_tokens`` caps the real
#: cost, this only sizes the estimate
GENERATION_COMPLETION_TOKENS = 400


_CRITERION = "the model's response to the instance, kept as written"


def response_skillset() -> SkillSet:
    """The criteria of a generation run: :data:`RESPONSE` alone, with no rubric (nothing
    scores a generated response). N/A is off: every instance gets a response."""
    return SkillSet((Skill(RESPONSE, GENERATION_ABILITY, _CRITERION, {}, allow_na=False),))


def fingerprinted(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What a generation run's fingerprint reads of its criteria: :data:`RESPONSE` as
    runs were fingerprinted when it carried a 1-5 rubric, level by level, so that a
    generation planned now has the fingerprint (and the name) of the same generation
    planned then (`flask-eval eval` finds it done). Never shown to a model, never
    stored as the run's criteria."""
    rubric = {str(n): "not scored: a generated response is kept as text" for n in range(1, 6)}
    return [
        {
            "name": RESPONSE,
            "ability": GENERATION_ABILITY,
            "criterion": _CRITERION,
            "rubric": rubric,
            "allow_na": False,
        }
    ]


class GenerationProtocol(Protocol):
    """Ask a model under test for its response to an instance and keep it verbatim.

    Not in ``rubrics.grading.PROTOCOLS``: that table is the judges' choice of protocol
    (``protocol:`` in a judges file), and a model under test is never a judge. A
    generation run uses this class by its kind.
    """

    name = "generate"
    kind = "generation"
    keeps_cut_off = True
    shares = (
        "the instance's system prompt, when it has one (calls whose instances share it "
        "repeat it byte for byte); nothing when there is none"
    )

    def render(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        """The instance's system prompt (when it is not blank) as a system message that
        ends the shared prefix, then the instruction verbatim as the user message (one
        plain part: nothing in it is shared by other instances). ``subject.response``
        and ``subject.reference`` are not shown: the model writes the response, and a
        reference answer would give it away.

        Turn k of a conversation is the chat so far, as the model lived it: each earlier
        user turn (``subject.history``, without its reference) followed by the model's
        own answer to it (``subject.answers``) as an assistant message, then turn k as
        the last user message (MT-Bench's way: FastChat's ``gen_model_answer``). A turn
        asked without the model's answers to every earlier turn is a planner's mistake:
        ValueError, never a request with answers missing."""
        _check(criteria)
        if len(subject.answers) != len(subject.history):
            raise ValueError(
                f"turn {subject.turn} of a conversation is asked with the model's own answers "
                f"to its {len(subject.history)} earlier turns, got {len(subject.answers)}"
            )
        messages: list[Message] = []
        if subject.system_prompt.strip():
            messages.append(message("system", subject.system_prompt))
        for turn, answer in zip(subject.history, subject.answers, strict=True):
            messages.append({"role": "user", "content": (Part(turn.user),)})
            messages.append({"role": "assistant", "content": (Part(answer),)})
        messages.append({"role": "user", "content": (Part(subject.instruction),)})
        return messages

    def read(self, text: str, criteria: Sequence[Criterion]) -> Reading:
        """``text`` as the response, whatever it is (empty included): there is no form to
        check, and refusing a text would drop what the model under test did answer. The
        score is None (a generation scores nothing); the text is the value."""
        _check(criteria)
        return Reading(scores={RESPONSE: None}, problems={}, rationales={}, values={RESPONSE: text})

    def reminder(
        self,
        previous: str,
        missing: Sequence[Criterion],
        problems: Mapping[str, str],
        read: Sequence[str] = (),
    ) -> list[Message]:
        """Nothing, ever: :meth:`read` never leaves a criterion unread, so there is never
        a reminder to send. Were it asked, a second turn ("answer again") would also change
        the task the model under test is measured on."""
        return []

    def completion_tokens(self, criteria: Sequence[Criterion]) -> int:
        """:data:`GENERATION_COMPLETION_TOKENS`: one response per call, whatever the
        criteria (there is only :data:`RESPONSE`)."""
        return GENERATION_COMPLETION_TOKENS


def _check(criteria: Sequence[Criterion]) -> None:
    """A generation call is about :data:`RESPONSE` and nothing else (a judgment's skills
    here would be a planner's mistake, not something to answer)."""
    names = [c.name for c in criteria]
    if names != [RESPONSE]:
        raise ValueError(f"a generation call has the one criterion {RESPONSE!r}, got {names}")


def _protocol(mode: str, options: Mapping[str, Any]) -> Protocol:
    return GenerationProtocol(mode)


#: the kind (rubrics/kinds.py): its workers are the models under test, its done rows
#: their responses
KIND = Kind(
    "generation",
    _protocol,
    lambda options: response_skillset(),
    Words(worker="model", holds="responses", doing="generating"),
    command="generate",
    workers_tested=True,
    export=instance_record("model"),
    fingerprinted=fingerprinted,
)
