"""Load Prometheus' absolute-grading eval sets (MT-Bench, Vicuna Bench) as instances.

Source: ``eval/benchmark/data/mt_bench_eval.json`` and ``vicuna_eval.json`` of
prometheus-eval/prometheus-eval (Apache License 2.0; the questions come from
lm-sys/FastChat's MT-Bench and Vicuna Bench). Each file is a JSON list of records::

    {"idx": 83, "response_source": "llama2_chat_13b", "category": "writing",
     "instruction": "<an already filled Prometheus absolute-grading prompt>",
     "gpt4_score": [4, 3, 4], "gpt4_feedback": ["...", "...", "..."]}

The filled prompt follows the layout of Prometheus' ``ABSOLUTE_PROMPT``
(``libs/prometheus-eval/prometheus_eval/prompts.py``): a task description, then
``###The instruction to evaluate:``, ``###Response to evaluate:``, ``###Reference Answer
(Score 5):`` (absent in the prompt without a reference), ``###Score Rubrics:`` (a
``[criteria]`` line and ``Score 1: ...`` to ``Score 5: ...``) and ``###Feedback:``.
:func:`parse_filled_prompt` takes it apart; each marker must appear once, so a response
that quotes a marker is refused rather than cut in the wrong place.

Each response source (``response_source``: MT-Bench's ``llama2_chat_13b``, ``chatgpt``,
``vicuna_13b``, ``wizardlm_13b``; Vicuna Bench's ``vicuna``, ``chat_gpt``, ``wizard``,
``llama-2-chat``) is a model of its own, so a judge ranks the four as GPT-4 did. The
records of one ``idx`` are one instance, id ``{idx}``, when their prompts agree on
everything but the response (instruction, reference, rubric, category: Vicuna Bench);
otherwise each is its own instance, id ``{idx}-{response_source}`` (MT-Bench, whose
second turn embeds the source model's own first answer, so the same ``idx`` is not the
same question). Instances are judged on one criterion,
:data:`~producer.importing.INSTANCE_CRITERION`, with the record's own rubric; ``task``
is the ``category``. Naming a ``model`` puts every response under that one model instead
(ids ``{idx}-{response_source}``), as the file's one set of responses.

GPT-4's three scores per record become reference ratings of (the record's model, its
instance): the reference named ``evaluator`` (``gpt-4``) holds the mean of the three (a
float, e.g. 3.67), and with ``each_run`` also ``gpt-4-run1`` ... ``gpt-4-run3`` hold
each run's score, so GPT-4's agreement with itself can be reported too.

Every problem raises :class:`~core.errors.InputError` as one line naming the file and the
record (``file: record 12 (idx 83): problem``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.limits import MAX_DOMAIN
from flask_eval.core.text import clip
from flask_eval.core.types import Instance, InstanceRubric, Response, ResponseSet
from flask_eval.producer.importing import (
    INSTANCE_CRITERION,
    MAX_DOCUMENT_BYTES,
    RubricProblem,
    check_identifier,
    check_judge_name,
    json_type,
    read_json_document,
    score_1_to_5,
)
from flask_eval.producer.inputs import MODEL_NAME_PATTERN
from flask_eval.report.references import Reference, ReferenceScore

__all__ = ["FilledPrompt", "PrometheusSet", "load_prometheus_set", "parse_filled_prompt"]

_WHAT = "a Prometheus eval set (a JSON list of records)"
#: the largest file read (see :data:`producer.importing.MAX_DOCUMENT_BYTES`)
MAX_BYTES = MAX_DOCUMENT_BYTES
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
_HEAD = "###Task Description:"
_INSTRUCTION = "###The instruction to evaluate:"
_RESPONSE = "###Response to evaluate:"
_REFERENCE = "###Reference Answer (Score 5):"
_RUBRIC = "###Score Rubrics:"
_FEEDBACK = "###Feedback:"
_SCORE_LINE = re.compile(r"^Score ([1-5]):[ \t]?", re.MULTILINE)
#: GPT-4 was asked three times per record
RUNS = 3


@dataclass(frozen=True)
class FilledPrompt:
    """The parts of a filled Prometheus absolute-grading prompt."""

    instruction: str
    response: str
    reference: str
    rubric: InstanceRubric


@dataclass(frozen=True)
class PrometheusSet:
    """One eval set: instances in file order, each model's responses (one set per
    response source, or one named set), and GPT-4's reference ratings."""

    instances: tuple[Instance, ...]
    response_sets: tuple[ResponseSet, ...]
    references: tuple[Reference, ...]


def _section(text: str, marker: str, *, required: bool = True) -> int:
    count = text.count(marker)
    if count == 0 and not required:
        return -1
    if count != 1:
        times = "is missing" if count == 0 else f"appears {count} times"
        raise RubricProblem(
            f"the prompt's {marker!r} section {times}; expected it once, in a filled "
            "Prometheus absolute-grading prompt"
        )
    return text.index(marker)


def _rubric(text: str) -> InstanceRubric:
    first, _, rest = text.strip("\n").partition("\n")
    criteria = first.strip()
    if criteria.startswith("[") and criteria.endswith("]"):
        criteria = criteria[1:-1].strip()
    if not criteria:
        raise RubricProblem("the score rubric has no criteria line ('[...]')")
    parts = _SCORE_LINE.split(rest)
    if parts[0].strip():
        raise RubricProblem("the score rubric has text between its criteria and 'Score 1:'")
    levels = [int(level) for level in parts[1::2]]
    if levels != [1, 2, 3, 4, 5]:
        shown = ", ".join(map(str, levels)) or "none"
        raise RubricProblem(
            f"the score rubric must give 'Score 1:' to 'Score 5:' once each, in order "
            f"(found: {shown})"
        )
    scores = {level: body.strip() for level, body in zip(levels, parts[2::2], strict=True)}
    empty = [str(level) for level, body in scores.items() if not body]
    if empty:
        raise RubricProblem(f"the score rubric's text of score {', '.join(empty)} is empty")
    return InstanceRubric(criteria, scores)


def _between(text: str, start: int, marker: str, end: int) -> str:
    """The text of a section, without the template's newline after its marker and the
    blank line before the next one (the text's own newlines are kept)."""
    return text[start + len(marker) : end].removeprefix("\n").removesuffix("\n\n")


def parse_filled_prompt(text: str) -> FilledPrompt:
    """Instruction, response, reference (``""`` when the prompt has none) and rubric of
    a filled Prometheus absolute-grading prompt; RubricProblem says what is wrong."""
    if not text.lstrip().startswith(_HEAD):
        raise RubricProblem(f"the prompt does not start with {_HEAD!r}")
    at_instruction = _section(text, _INSTRUCTION)
    at_response = _section(text, _RESPONSE)
    at_reference = _section(text, _REFERENCE, required=False)
    at_rubric = _section(text, _RUBRIC)
    at_feedback = _section(text, _FEEDBACK)
    ends = [at_instruction, at_response, at_reference, at_rubric, at_feedback]
    present = [at for at in ends if at >= 0]
    if present != sorted(present):
        raise RubricProblem("the prompt's sections are out of order")
    if text[at_feedback + len(_FEEDBACK) :].strip():
        raise RubricProblem(f"the prompt has text after {_FEEDBACK!r}")
    response_end = at_reference if at_reference >= 0 else at_rubric
    instruction = _between(text, at_instruction, _INSTRUCTION, at_response)
    if not instruction.strip():
        raise RubricProblem("the prompt's instruction is empty")
    reference = ""
    if at_reference >= 0:
        reference = _between(text, at_reference, _REFERENCE, at_rubric)
    return FilledPrompt(
        instruction=instruction,
        response=_between(text, at_response, _RESPONSE, response_end),
        reference=reference,
        rubric=_rubric(text[at_rubric + len(_RUBRIC) : at_feedback]),
    )


def default_model(path: str) -> str:
    """``mt_bench_eval.json`` -> ``mt-bench``, ``vicuna_eval.json`` -> ``vicuna``."""
    stem = Path(path).name.split(".")[0].removesuffix("_eval")
    return stem.replace("_", "-") or "prometheus-set"


def _label(number: int, record: object) -> str:
    if isinstance(record, dict) and isinstance(record.get("idx"), int | str):
        return f"record {number} (idx {clip(record['idx'], 40)})"
    return f"record {number}"


def _scores(record: Mapping[str, Any]) -> list[int]:
    raw = record.get("gpt4_score")
    if not isinstance(raw, list) or len(raw) != RUNS:
        shown = f"{len(raw)} items" if isinstance(raw, list) else json_type(raw)
        raise RubricProblem(f"field 'gpt4_score' must be a list of {RUNS} scores, got {shown}")
    scores: list[int] = []
    for value in raw:
        try:
            scores.append(score_1_to_5(value))
        except RubricProblem as exc:
            raise RubricProblem(f"field 'gpt4_score': {exc}") from None
    return scores


def _idx_and_source(record: Mapping[str, Any]) -> tuple[str, str]:
    idx = record.get("idx")
    if isinstance(idx, bool) or not isinstance(idx, int | str) or not str(idx).strip():
        raise RubricProblem(f"field 'idx' must be an integer or a string, got {json_type(idx)}")
    source = check_identifier(record.get("response_source"), "field 'response_source'", 64)
    return str(idx), source


@dataclass(frozen=True)
class _Record:
    number: int
    idx: str
    source: str
    task: str
    parts: FilledPrompt
    scores: list[int]

    @property
    def question(self) -> tuple[str, str, InstanceRubric, str]:
        """What one instance is: all but the response."""
        return self.parts.instruction, self.parts.reference, self.parts.rubric, self.task


def _read_record(number: int, record: object) -> _Record:
    if not isinstance(record, dict):
        raise RubricProblem(f"expected an object, got {json_type(record)}")
    idx, source = _idx_and_source(record)
    task = check_identifier(record.get("category"), "field 'category'", MAX_DOMAIN)
    prompt = record.get("instruction")
    if not isinstance(prompt, str):
        raise RubricProblem(f"field 'instruction' must be a string, got {json_type(prompt)}")
    try:
        parts = parse_filled_prompt(prompt)
    except RubricProblem as exc:
        raise RubricProblem(f"field 'instruction': {exc}") from None
    return _Record(number, idx, source, task, parts, _scores(record))


def _records(path: str, data: list[Any]) -> list[_Record]:
    records: list[_Record] = []
    first: dict[tuple[str, str], int] = {}
    for number, raw in enumerate(data, start=1):
        try:
            rec = _read_record(number, raw)
            instance_id = check_identifier(f"{rec.idx}-{rec.source}", "the instance id")
            if (rec.idx, rec.source) in first:
                raise RubricProblem(
                    f"duplicate instance {clip(instance_id)} (first in record "
                    f"{first[(rec.idx, rec.source)]})"
                )
        except RubricProblem as exc:
            raise InputError(f"{_label(number, raw)}: {exc}", path) from None
        first[(rec.idx, rec.source)] = number
        records.append(rec)
    return records


def _instance_ids(records: list[_Record], shared: bool) -> list[str]:
    """Each record's instance id: ``{idx}`` when ``shared`` and every record of its idx
    asks the same question, else ``{idx}-{source}``."""
    questions: dict[str, set[tuple[str, str, InstanceRubric, str]]] = {}
    for rec in records:
        questions.setdefault(rec.idx, set()).add(rec.question)
    return [
        check_identifier(rec.idx, "the instance id")
        if shared and len(questions[rec.idx]) == 1
        else f"{rec.idx}-{rec.source}"
        for rec in records
    ]


def _model_of(rec: _Record, path: str) -> str:
    if _MODEL_NAME.fullmatch(rec.source) is None:
        raise InputError(
            f"record {rec.number}: response_source {clip(rec.source)} is not a valid model "
            "name (letters, digits, '.', '_' or '-'); to judge every response as one model, "
            "name it with --model NAME",
            path,
        )
    return rec.source


def load_prometheus_set(
    path: str, model: str | None = None, *, evaluator: str = "gpt-4", each_run: bool = False
) -> PrometheusSet:
    """Load MT-Bench or Vicuna Bench as Prometheus ships it (see the module docstring)."""
    if model is not None and _MODEL_NAME.fullmatch(model) is None:
        raise InputError(f"invalid model name {clip(model)}; use letters, digits, '.', '_' or '-'")
    try:
        check_judge_name(evaluator, "the evaluator's name")
    except RubricProblem as exc:
        raise InputError(str(exc)) from None
    data = read_json_document(path, _WHAT, MAX_BYTES)
    if not isinstance(data, list):
        raise InputError(f"expected a JSON list of records, got {json_type(data)}", path)
    if not data:
        raise InputError("no records; expected a JSON list of records", path)
    records = _records(path, data)
    ids = _instance_ids(records, shared=model is None)
    instances: dict[str, Instance] = {}
    by_model: dict[str, list[Response]] = {}
    means: list[ReferenceScore] = []
    runs: list[list[ReferenceScore]] = [[] for _ in range(RUNS)]
    for rec, instance_id in zip(records, ids, strict=True):
        name = model if model is not None else _model_of(rec, path)
        instances.setdefault(
            instance_id,
            Instance(
                id=instance_id,
                instruction=rec.parts.instruction,
                answer=rec.parts.reference,
                skills=(INSTANCE_CRITERION,),
                line=rec.number,
                rubrics={INSTANCE_CRITERION: rec.parts.rubric},
                task=rec.task,
            ),
        )
        by_model.setdefault(name, []).append(
            Response(name, instance_id, rec.parts.response, rec.number)
        )
        mean = sum(rec.scores) / len(rec.scores)
        means.append(ReferenceScore(name, instance_id, INSTANCE_CRITERION, mean, rec.number))
        for run, score in zip(runs, rec.scores, strict=True):
            run.append(
                ReferenceScore(name, instance_id, INSTANCE_CRITERION, float(score), rec.number)
            )
    references = [Reference(evaluator, path, tuple(means))]
    if each_run:
        references += [
            Reference(f"{evaluator}-run{n}", path, tuple(run)) for n, run in enumerate(runs, 1)
        ]
    sets = tuple(ResponseSet(name, path, tuple(items)) for name, items in by_model.items())
    return PrometheusSet(tuple(instances.values()), sets, tuple(references))
