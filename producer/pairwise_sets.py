"""Load Prometheus' pairwise eval sets (Auto-J, HHH Alignment) with their gold labels.

Source: ``eval/benchmark/data/autoj_pairwise.json`` and ``hhh_alignment_eval.json`` of
prometheus-eval/prometheus-eval (Apache License 2.0). They are re-formatted copies of
GAIR-NLP/auto-j's pairwise test data (``data/test/testdata_pairwise.jsonl``) and of
google/BIG-bench's HHH Alignment task; check those licenses before redistributing.
Nothing of them is in this repository: the files are read where the user keeps them.

``autoj_pairwise.json`` is JSON Lines, one comparison per line::

    {"scenario": "post_summarization", "label": 1, "prompt": "<the instruction>",
     "response 1": "...", "response 2": "..."}

``label`` 0: response 1 is better, 1: response 2 is better, 2: a tie (Auto-J's own
encoding, kept as is). Each line becomes one instance, id ``autoj-{line}``, judged on one
overall preference (:data:`OVERALL`), ``task`` = the scenario; the two responses belong
to the models ``response-1`` and ``response-2`` (or as named).

``hhh_alignment_eval.json`` is a JSON list of records::

    {"source": "harmless", "chosen_instruction": "<filled prompt>",
     "rejected_instruction": "<filled prompt>"}

Both prompts are Prometheus absolute-grading prompts already filled in with the same
instruction and score rubric and a different response (the one humans chose, the one
they rejected). Each is taken apart with
:func:`producer.prometheus_sets.parse_filled_prompt`; the two must agree on instruction,
reference and rubric. Each record becomes one instance, id ``hhh-{record}``, judged on
its own rubric (:data:`~producer.importing.INSTANCE_CRITERION`), ``task`` = the source;
the responses belong to ``chosen`` and ``rejected`` (or as named), the gold label says
the chosen one is better.

Gold labels are :class:`PairLabel` rows with ``0`` = the first model's response is
better, ``1`` = the second's, ``2`` = a tie. Every problem raises
:class:`~core.errors.InputError` as one line naming ``file:line`` (Auto-J) or the file and
the record (HHH), and nothing is returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.files import open_input
from flask_eval.core.jsonl import read_json_lines
from flask_eval.core.limits import MAX_DOMAIN
from flask_eval.core.text import clip
from flask_eval.core.types import Instance, Response, ResponseSet
from flask_eval.producer.importing import (
    INSTANCE_CRITERION,
    RubricProblem,
    check_identifier,
    json_type,
    read_json_document,
)
from flask_eval.producer.inputs import check_model_name
from flask_eval.producer.prometheus_sets import FilledPrompt, parse_filled_prompt
from flask_eval.rubrics.pairwise import PAIRWISE_OVERALL

__all__ = [
    "LABEL_FIRST",
    "LABEL_SECOND",
    "LABEL_TIE",
    "OVERALL",
    "PairLabel",
    "PairwiseSet",
    "load_autoj_pairwise",
    "load_hhh_alignment",
    "load_pairwise_set",
]

#: the one criterion of a comparison without a rubric
OVERALL = PAIRWISE_OVERALL
LABEL_FIRST = 0
LABEL_SECOND = 1
LABEL_TIE = 2
_LABELS = (LABEL_FIRST, LABEL_SECOND, LABEL_TIE)
_SWAPPED = {LABEL_FIRST: LABEL_SECOND, LABEL_SECOND: LABEL_FIRST, LABEL_TIE: LABEL_TIE}
AUTOJ_MODELS = ("response-1", "response-2")
HHH_MODELS = ("chosen", "rejected")
_AUTOJ_FIELDS = {"response 1": 0, "response 2": 1}
_HHH_FIELDS = ("chosen_instruction", "rejected_instruction")


@dataclass(frozen=True)
class PairLabel:
    """A gold preference between the responses of two models to one instance:
    ``label`` 0 = ``first_model``'s is better, 1 = ``second_model``'s, 2 = a tie."""

    instance_id: str
    first_model: str
    second_model: str
    label: int

    def in_order(self, model: str, model_b: str) -> int:
        """The label of the comparison shown as (``model`` first, ``model_b`` second):
        the same, or swapped (0 <-> 1) for the other order; ValueError for other models."""
        if (model, model_b) == (self.first_model, self.second_model):
            return self.label
        if (model, model_b) == (self.second_model, self.first_model):
            return _SWAPPED[self.label]
        raise ValueError(
            f"label of {self.instance_id!r} compares {self.first_model!r} and "
            f"{self.second_model!r}, not {model!r} and {model_b!r}"
        )


@dataclass(frozen=True)
class PairwiseSet:
    """An imported pairwise set: instances in file order, the two models' responses
    (first, second) and one gold label per instance."""

    instances: tuple[Instance, ...]
    response_sets: tuple[ResponseSet, ResponseSet]
    labels: tuple[PairLabel, ...]

    @property
    def models(self) -> tuple[str, str]:
        return self.response_sets[0].model, self.response_sets[1].model

    def label_of(self) -> Mapping[str, PairLabel]:
        """Instance id -> its gold label."""
        return {label.instance_id: label for label in self.labels}


def _check_models(models: Sequence[str]) -> tuple[str, str]:
    if len(models) != 2:
        raise InputError(f"a pairwise set has 2 models, got {len(models)}")
    first, second = models
    check_model_name(first)
    check_model_name(second)
    if first.casefold() == second.casefold():
        raise InputError(f"the two models of a pairwise set need two names, got {clip(first)}")
    return first, second


def _label(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in _LABELS:
        shown = clip(value) if isinstance(value, str | int | float) else json_type(value)
        raise RubricProblem(
            "field 'label' must be 0 (response 1 is better), 1 (response 2 is better) or "
            f"2 (a tie), got {shown}"
        )
    return value


def _text(record: Mapping[str, Any], key: str, *, empty: bool) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        got = "missing" if key not in record else json_type(value)
        raise RubricProblem(f"field {key!r} must be a string, got {got}")
    if not empty and not value.strip():
        raise RubricProblem(f"field {key!r} is empty")
    return value


def _task(record: Mapping[str, Any], key: str) -> str | None:
    if key not in record:
        return None
    return check_identifier(record[key], f"field {key!r}", MAX_DOMAIN)


def _pairwise_set(
    instances: list[Instance],
    texts: list[tuple[str, str]],
    labels: list[int],
    models: tuple[str, str],
    path: str,
) -> PairwiseSet:
    sets = tuple(
        ResponseSet(
            model,
            path,
            tuple(
                Response(model, inst.id, pair[side], inst.line)
                for inst, pair in zip(instances, texts, strict=True)
            ),
        )
        for side, model in enumerate(models)
    )
    first, second = models
    gold = tuple(PairLabel(i.id, first, second, g) for i, g in zip(instances, labels, strict=True))
    return PairwiseSet(tuple(instances), (sets[0], sets[1]), gold)


def load_autoj_pairwise(path: str, models: Sequence[str] = AUTOJ_MODELS) -> PairwiseSet:
    """Load Auto-J's pairwise test set as Prometheus ships it (see the module docstring)."""
    pair = _check_models(models)
    instances: list[Instance] = []
    texts: list[tuple[str, str]] = []
    labels: list[int] = []
    for line, record in read_json_lines(path, "Auto-J's pairwise set (JSON Lines)"):
        try:
            prompt = _text(record, "prompt", empty=False)
            responses = (
                _text(record, "response 1", empty=True),
                _text(record, "response 2", empty=True),
            )
            label = _label(record.get("label"))
            task = _task(record, "scenario")
        except RubricProblem as exc:
            raise InputError(str(exc), path, line) from None
        instances.append(Instance(f"autoj-{line}", prompt, "", (OVERALL,), line=line, task=task))
        texts.append(responses)
        labels.append(label)
    return _pairwise_set(instances, texts, labels, pair, path)


def _where(number: int, record: object) -> str:
    if isinstance(record, dict) and isinstance(record.get("source"), str):
        return f"record {number} (source {clip(record['source'], 40)})"
    return f"record {number}"


def _filled(record: Mapping[str, Any], key: str) -> FilledPrompt:
    try:
        return parse_filled_prompt(_text(record, key, empty=False))
    except RubricProblem as exc:
        raise RubricProblem(f"field {key!r}: {exc}") from None


def load_hhh_alignment(path: str, models: Sequence[str] = HHH_MODELS) -> PairwiseSet:
    """Load HHH Alignment as Prometheus ships it (see the module docstring)."""
    pair = _check_models(models)
    data = read_json_document(path, "HHH Alignment as Prometheus ships it (a JSON list)")
    if not isinstance(data, list):
        raise InputError(f"expected a JSON list of records, got {json_type(data)}", path)
    if not data:
        raise InputError("no records; expected a JSON list of records", path)
    instances: list[Instance] = []
    texts: list[tuple[str, str]] = []
    for number, record in enumerate(data, start=1):
        try:
            if not isinstance(record, dict):
                raise RubricProblem(f"expected an object, got {json_type(record)}")
            task = _task(record, "source")
            chosen, rejected = (_filled(record, key) for key in _HHH_FIELDS)
            for what in ("instruction", "reference", "rubric"):
                if getattr(chosen, what) != getattr(rejected, what):
                    raise RubricProblem(
                        f"the chosen and rejected prompts differ in their {what}; expected "
                        "one instruction and rubric with two responses"
                    )
        except RubricProblem as exc:
            raise InputError(f"{_where(number, record)}: {exc}", path) from None
        instances.append(
            Instance(
                f"hhh-{number}",
                chosen.instruction,
                chosen.reference,
                (INSTANCE_CRITERION,),
                line=number,
                rubrics={INSTANCE_CRITERION: chosen.rubric},
                task=task,
            )
        )
        texts.append((chosen.response, rejected.response))
    return _pairwise_set(instances, texts, [LABEL_FIRST] * len(instances), pair, path)


def load_pairwise_set(path: str, models: Sequence[str] | None = None) -> PairwiseSet:
    """Either set, told apart by its first character: ``[`` (a JSON list) is HHH
    Alignment's layout, anything else is read as Auto-J's JSON Lines."""
    with open_input(path, "a pairwise set (Auto-J's JSON Lines or HHH's JSON)") as handle:
        try:
            head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        except OSError:
            head = b""  # the loader says what is wrong with the file
    if head.startswith(b"["):
        return load_hhh_alignment(path, HHH_MODELS if models is None else models)
    return load_autoj_pairwise(path, AUTOJ_MODELS if models is None else models)
