"""Load BiGGen Bench (Kim et al., 2024) as it ships: one JSON object keyed by instance id.

Source: ``BiGGen-Bench/sample_responses.json`` and ``sample_evals.json`` of
prometheus-eval/prometheus-eval (Apache License 2.0); the same layout as the
BiGGen Bench data sets on the Hugging Face hub. Each value holds::

    id, capability, task, instance_idx, system_prompt, input, reference_answer,
    score_rubric: {criteria, score1_description, ..., score5_description},
    response, response_model_name                     # one model's response (optional)
    feedback, score, eval_model_name                  # an evaluator's verdict (evals only)

:func:`load_biggen` gives one :class:`~core.types.Instance` per key (but BiGGen's 18
``llm_judge`` instances, left out by default as BiGGen's pipeline leaves them out for
Prometheus evaluators: see :mod:`report.biggen`), judged on one criterion,
:data:`~producer.importing.INSTANCE_CRITERION` (``"rubric"``), whose rubric is the
instance's own ``score_rubric``; ``capability`` and ``task`` are kept for grouping,
``system_prompt`` is shown to the judge and ``reference_answer`` is the reference. The
responses become one :class:`~core.types.ResponseSet` per ``response_model_name``.

:func:`load_biggen_evals` reads the evaluators' scores of an evals file as reference
ratings (one :class:`report.references.Reference` per ``eval_model_name``), the records
the report's agreement compares judges with. A ``null`` score (the evaluator's verdict
could not be parsed) is not a rating and is left out.

Every problem raises :class:`~core.errors.InputError` as one line ``file: key 'id':
problem``; nothing is returned in part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.limits import MAX_DOMAIN
from flask_eval.core.text import clip
from flask_eval.core.types import Instance, Response, ResponseSet
from flask_eval.producer.importing import (
    INSTANCE_CRITERION,
    MAX_DOCUMENT_BYTES,
    RubricProblem,
    check_identifier,
    check_judge_name,
    json_type,
    parse_rubric,
    read_json_document,
    score_1_to_5,
)
from flask_eval.producer.inputs import MODEL_NAME_PATTERN
from flask_eval.report.biggen import is_llm_judge
from flask_eval.report.references import Reference, ReferenceScore

__all__ = ["load_biggen", "load_biggen_evals"]

_WHAT = "a BiGGen Bench file (a JSON object keyed by instance id)"
#: the largest file read (see :data:`producer.importing.MAX_DOCUMENT_BYTES`)
MAX_BYTES = MAX_DOCUMENT_BYTES
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)


def _records(path: str) -> list[tuple[str, dict[str, Any]]]:
    data = read_json_document(path, _WHAT, MAX_BYTES)
    if not isinstance(data, dict):
        raise InputError(
            f"expected a JSON object keyed by instance id, got {json_type(data)}", path
        )
    if not data:
        raise InputError("no records; expected a JSON object keyed by instance id", path)
    records: list[tuple[str, dict[str, Any]]] = []
    for key, value in data.items():
        try:
            check_identifier(key, "the key (an instance id)")
        except RubricProblem as exc:
            raise InputError(f"key {clip(key)}: {exc}", path) from None
        if not isinstance(value, dict):
            raise _error(path, key, f"expected an object, got {json_type(value)}")
        if "id" in value and value["id"] != key:
            raise _error(path, key, f"field 'id' is {clip(value['id'])}; it must equal the key")
        records.append((key, value))
    return records


def _error(path: str, key: str, problem: str) -> InputError:
    return InputError(f"key {clip(key)}: {problem}", path)


def _text(record: Mapping[str, Any], field: str, *, empty: bool, default: str | None = None) -> str:
    if field not in record:
        if default is not None:
            return default
        raise RubricProblem(f"missing field {field!r}")
    value = record[field]
    if not isinstance(value, str):
        raise RubricProblem(f"field {field!r} must be a string, got {json_type(value)}")
    if not empty and not value.strip():
        raise RubricProblem(f"field {field!r} is empty")
    return value


def _model(record: Mapping[str, Any], model: str | None) -> str:
    if model is not None:
        return model
    if "response_model_name" not in record:
        raise RubricProblem("missing field 'response_model_name' (whose response this is)")
    name = record["response_model_name"]
    if not isinstance(name, str) or _MODEL_NAME.fullmatch(name) is None:
        raise RubricProblem(
            f"response_model_name {clip(name)} is not a valid model name (letters, digits, "
            "'.', '_' or '-'); name the model with --model NAME"
        )
    return name


def _check_model(model: str | None) -> None:
    if model is not None and _MODEL_NAME.fullmatch(model) is None:
        raise InputError(f"invalid model name {clip(model)}; use letters, digits, '.', '_' or '-'")


def _instance(key: str, record: Mapping[str, Any]) -> Instance:
    capability = check_identifier(record.get("capability"), "field 'capability'", MAX_DOMAIN)
    task = check_identifier(record.get("task"), "field 'task'", MAX_DOMAIN)
    if "score_rubric" not in record:
        raise RubricProblem("missing field 'score_rubric'")
    try:
        rubric = parse_rubric(record["score_rubric"])
    except RubricProblem as exc:
        raise RubricProblem(f"field 'score_rubric': {exc}") from None
    return Instance(
        id=key,
        instruction=_text(record, "input", empty=False),
        answer=_text(record, "reference_answer", empty=True),
        skills=(INSTANCE_CRITERION,),
        system_prompt=_text(record, "system_prompt", empty=True, default=""),
        rubrics={INSTANCE_CRITERION: rubric},
        capability=capability,
        task=task,
    )


def load_biggen(
    path: str, model: str | None = None, *, llm_judge: bool = False
) -> tuple[list[Instance], list[ResponseSet]]:
    """BiGGen Bench instances (file order) and the responses the file carries.

    Records without a ``response`` add an instance only. ``model`` names the model of
    every response in the file (for names BiGGen writes with a ``/``, such as
    ``meta-llama/Llama-2-7b-chat-hf``); otherwise each response's
    ``response_model_name`` must be a valid model name. The ``llm_judge`` instances are
    left out unless ``llm_judge`` (they are checked all the same).
    """
    _check_model(model)
    instances: list[Instance] = []
    by_model: dict[str, list[Response]] = {}
    for key, record in _records(path):
        kept = llm_judge or not is_llm_judge(key)
        try:
            instance = _instance(key, record)
            if "response" in record:
                text = _text(record, "response", empty=True)
                name = _model(record, model)
                if kept:
                    by_model.setdefault(name, []).append(Response(name, key, text))
            if kept:
                instances.append(instance)
        except RubricProblem as exc:
            raise _error(path, key, str(exc)) from None
    sets = [ResponseSet(name, path, tuple(items)) for name, items in by_model.items()]
    return instances, sets


def load_biggen_evals(path: str, model: str | None = None) -> list[Reference]:
    """The evaluators' scores of a BiGGen Bench evals file, one Reference per
    ``eval_model_name`` (in order of first appearance).

    Each score is a reference rating of (``response_model_name`` or ``model``, the
    instance id, :data:`INSTANCE_CRITERION`) by that evaluator; it must be an integer 1-5
    (``null``: no rating, left out).
    """
    _check_model(model)
    by_evaluator: dict[str, list[ReferenceScore]] = {}
    for key, record in _records(path):
        try:
            evaluator = check_judge_name(record.get("eval_model_name"), "field 'eval_model_name'")
            name = _model(record, model)
            if "score" not in record:
                raise RubricProblem("missing field 'score'")
            raw = record["score"]
            if raw is None:
                by_evaluator.setdefault(evaluator, [])
                continue
            try:
                score = score_1_to_5(raw)
            except RubricProblem as exc:
                raise RubricProblem(f"field 'score': {exc}") from None
        except RubricProblem as exc:
            raise _error(path, key, str(exc)) from None
        item = ReferenceScore(name, key, INSTANCE_CRITERION, float(score), 0)
        by_evaluator.setdefault(evaluator, []).append(item)
    return [Reference(name, path, tuple(scores)) for name, scores in by_evaluator.items()]
