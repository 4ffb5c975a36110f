"""Prometheus-Vision's absolute grading: an image beside the prompt, one criterion per
call, ``Feedback: ... [RESULT] N`` (pure).

The layout is the one the Prometheus-Vision evaluator VLMs were trained and are run on,
reproduced from prometheus-vision (https://github.com/prometheus-eval/prometheus-vision,
``README.md``, "Input and Output Format of Prometheus-Vision", and the human turns of
``sample_train_data.json``; Lee, Kim et al., "Prometheus-Vision: Vision-Language Model
as a Judge for Fine-Grained Evaluation", arXiv 2401.06591): one user turn that opens with
the image (LLaVA's ``<image>`` token, then a newline) followed by the sections
``###Task Description:`` (whose first sentence names the image: "... a reference answer
that gets a score of 5, image and a score rubric representing an evaluation criterion is
given.", and whose steps differ from Prometheus 2's in their wording: "assesses", and
the output format without quotes), ``###The instruction to evaluate:``, ``###Response
to evaluate:``, ``###Reference Answer (Score 5):``, ``###Score Rubrics:`` (``[criterion]``
and one ``Score N:`` line per level) and last ``###Feedback:``, which the judge
continues. There is no system message of the protocol's: the model's conversation
template (LLaVA's ``vicuna_v1``, which an OpenAI-compatible server such as vLLM applies
to a LLaVA model) supplies its own.

Sent to an OpenAI-compatible server, the user message's content is the image parts
first, then the text, as the model was trained (``rubrics.images`` leaves a rendering
that already holds its images as it is). A prompt without images is the same text alone,
its task description and the instruction's heading then marked as the shared prefix, as
Prometheus 2's are (``rubrics.prometheus``); with images nothing is shared, since the
image opens the prompt.

What is ours, beyond the trained layout: without a reference answer, its section and
its mention in the task description are left out (the trained format always has one);
the models' system prompt is shown inside the instruction section under its own label;
untrusted texts are neutralized (``rubrics.prometheus.neutralize``); answers are read,
and asked again, exactly as Prometheus 2's (``rubrics.prometheus``: ``[RESULT] N`` and
the variants its reader accepts, at the very end of the answer).
"""

from __future__ import annotations

from collections.abc import Sequence

from flask_eval.rubrics.grading import PROTOCOLS, Criterion, Subject
from flask_eval.rubrics.messages import ImagePart, Part, image_part, message, parts_of
from flask_eval.rubrics.prometheus import (
    FEEDBACK_PLACEHOLDER,
    PrometheusProtocol,
    PrometheusText,
    layout,
    neutralize,
    reference_heading,
    rubric_text,
)
from flask_eval.rubrics.prompt import Message
from flask_eval.rubrics.protocol import (
    FEEDBACK_MARKER,
    PROMETHEUS_INSTRUCTION,
    PROMETHEUS_RESPONSE,
    PROMETHEUS_RUBRIC,
    RESULT_MARKER,
)
from flask_eval.rubrics.scale import FIVE_POINT, Scale

#: the start of the task description's first sentence: a prompt whose task description
#: opens with it and names the image (:data:`IMAGE_WORDS`) is in this layout
OPENING = "An instruction (might include an Input inside it), a response to evaluate"
#: the words of the first sentence that name the image, as trained
IMAGE_WORDS = "image and a score rubric representing an evaluation criterion is given."


def description(scale: Scale, reference: bool) -> str:
    """The task description's first sentence (with or without a reference answer)."""
    if reference:
        return f"{OPENING}, a reference answer that gets a score of {scale.high}, {IMAGE_WORDS}"
    return f"{OPENING}, {IMAGE_WORDS}"


def steps(scale: Scale) -> str:
    """The task description's four steps, in Prometheus-Vision's wording."""
    between = f"an integer between {scale.low} and {scale.high}"
    return (
        "1. Write a detailed feedback that assesses the quality of the response strictly "
        "based on the given score rubric, not evaluating in general.\n"
        f"2. After writing a feedback, write a score that is {between}. You should refer to "
        "the score rubric.\n"
        f"3. The output format should look as follows: Feedback: {FEEDBACK_PLACEHOLDER} "
        f"{RESULT_MARKER} ({between.replace('an integer', 'an integer number')})\n"
        "4. Please do not generate any other opening, closing, and explanations."
    )


def render(subject: Subject, criterion: Criterion, scale: Scale = FIVE_POINT) -> list[Message]:
    """The one user message of Prometheus-Vision's grading of ``subject`` on
    ``criterion``: the instruction's images first, then the text."""
    if subject.response_b is not None:
        raise ValueError("the prometheus-vision protocol grades one response (absolute grading)")
    text = PrometheusText(
        system="",
        description=description(scale, bool(subject.reference.strip())),
        steps=steps(scale),
        instruction_heading=PROMETHEUS_INSTRUCTION,
        reference_heading=reference_heading(scale),
        rubric_heading=PROMETHEUS_RUBRIC,
    )
    rendered = layout(
        text,
        subject,
        responses=[(PROMETHEUS_RESPONSE, subject.response)],
        rubric=rubric_text(criterion, scale),
        clean=neutralize,
    )
    shared, *rest = parts_of(rendered[-1])  # the system message of Prometheus 2 is left out
    tail = "".join(p.text for p in rest)
    if tail.endswith(FEEDBACK_MARKER + " "):  # as trained: the prompt ends with the marker
        tail = tail[:-1]
    if not subject.images:
        return [message("user", shared.text, tail)]
    content: list[Part | ImagePart] = [image_part(i) for i in subject.images]
    content.append(Part(shared.text + tail))
    return [{"role": "user", "content": tuple(content)}]


class PrometheusVisionProtocol(PrometheusProtocol):
    """Prometheus-Vision's absolute grading: one call per criterion in either mode, the
    image beside the prompt, each answered with a feedback and a final ``[RESULT] N``
    (read as Prometheus 2's)."""

    name = "prometheus-vision"
    shares = (
        "nothing when the instruction has images (the image opens the prompt, as trained); "
        "without images the task description with its steps and the instruction's heading"
    )

    def render(self, subject: Subject, criteria: Sequence[Criterion]) -> list[Message]:
        return render(subject, self.one(criteria), self.scale)


PROTOCOLS[PrometheusVisionProtocol.name] = PrometheusVisionProtocol
