"""Load Janus's Multifaceted Bench (Lee et al., 2024; ``kaist-ai/Multifaceted-Bench``).

Each record (the data set's rows, as ``datasets``' ``to_json`` writes them)::

    source, system, prompt, reference_answer,
    rubrics: [{criteria, score_descriptions: {"1": ..., ..., "5": ...}}, ...],
    preference_set: [{dimension, subdimension, preference, description}, ...]  # optional
    id                                        # optional; else the record's 0-based index
    response, response_model_name             # one model's response (optional)

Names read as Janus's code reads them: ``rubric`` for ``rubrics`` (its first release and
its evaluation script's ``--rubric_key rubric``), ``user_prompt`` for ``prompt``. A rubric
may also be in Prometheus's flat shape (``score1_description``, ...).

The file is JSON Lines, a JSON list of records, or a JSON object keyed by instance id
(Janus's evaluation output). Without an ``id`` an instance is numbered by its place in
the file, from ``"0"``: the keys of Janus's response files (``{"0": {"response": ...}}``),
so ``--responses NAME=PATH`` lines answer them with ``question_id`` 0, 1, ...

:func:`load_multifaceted` gives one :class:`~core.types.Instance` per record, judged on
each of its rubrics as a criterion of its own (:attr:`Instance.rubrics`). A criterion is
named by its preference's ``dimension`` (``style``, ``background_knowledge``,
``informativeness``, ``harmlessness``) when the record's ``preference_set`` lists one
distinct dimension per rubric, in the rubrics' order (the data set writes each rubric from
the preference at its place); else ``rubric_1``, ``rubric_2``, ... in order. ``system`` is
shown to the judge as the system prompt, ``reference_answer`` is the reference, and
``source`` is the instance's ``task`` (the report's per-source rows).

Every problem raises :class:`~core.errors.InputError` as one line naming the file and the
line, record or key; nothing is returned in part.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.files import open_input
from flask_eval.core.jsonl import read_json_lines
from flask_eval.core.limits import MAX_DOMAIN
from flask_eval.core.text import clip
from flask_eval.core.types import Instance, InstanceRubric, Response, ResponseSet
from flask_eval.producer.importing import (
    MAX_DOCUMENT_BYTES,
    RubricProblem,
    check_identifier,
    json_type,
    parse_rubric,
    read_json_document,
)
from flask_eval.producer.inputs import MODEL_NAME_PATTERN

__all__ = ["load_multifaceted", "rubric_names"]

_WHAT = "a Multifaceted Bench file (JSON Lines, or a JSON list of records)"
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
#: a preference dimension usable as a criterion's name
_DIMENSION = re.compile(r"[a-z][a-z0-9_]{0,39}")
#: each field and the other name Janus's code gives it
_ALIASES = {"prompt": "user_prompt", "rubrics": "rubric"}


def _first_char(path: str) -> bytes:
    with open_input(path, _WHAT) as handle:
        head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head[:1]


def _records(path: str) -> Iterator[tuple[str | None, int | None, str, dict[str, Any]]]:
    """(id the container gives or None, line or None, where, record) per record."""
    first = _first_char(path)
    if first == b"[":
        data = read_json_document(path, _WHAT, MAX_DOCUMENT_BYTES)
        if not data:
            raise InputError("no records; expected a JSON list of Multifaceted Bench records", path)
        for n, value in enumerate(data):
            yield None, None, f"record {n + 1}", _object(value, path, f"record {n + 1}")
        return
    if first == b"{":
        keyed = _keyed(path)
        if keyed is not None:
            for key, value in keyed.items():
                where = f"key {clip(key)}"
                yield key, None, where, _object(value, path, where)
            return
    for line, record in read_json_lines(path, _WHAT):
        yield None, line, "", record


def _keyed(path: str) -> dict[str, Any] | None:
    """The records of a JSON object keyed by id (Janus's evaluation output), or None when
    the file is JSON Lines (a line per record: not one JSON document, or one record)."""
    try:
        data = read_json_document(path, _WHAT, MAX_DOCUMENT_BYTES)
    except InputError:
        return None
    if not isinstance(data, dict) or any(k in data for k in ("prompt", "user_prompt", "system")):
        return None
    if not data:
        raise InputError("no records; expected Multifaceted Bench records", path)
    return data


def _object(value: object, path: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected an object, got {json_type(value)}", path)
    return value


def _field(record: Mapping[str, Any], name: str) -> tuple[str, Any]:
    """(the name found, its value) of a field or of its alias; RubricProblem if neither."""
    alias = _ALIASES.get(name)
    if alias is not None and name in record and alias in record:
        raise RubricProblem(f"fields {name!r} and {alias!r} both given; give one of them")
    for key in (name, alias):
        if key is not None and key in record:
            return key, record[key]
    also = f" (or {alias!r})" if alias else ""
    raise RubricProblem(f"missing field {name!r}{also}")


def _text(record: Mapping[str, Any], name: str, *, empty: bool) -> str:
    key, value = _field(record, name)
    if not isinstance(value, str):
        raise RubricProblem(f"field {key!r} must be a string, got {json_type(value)}")
    if not empty and not value.strip():
        raise RubricProblem(f"field {key!r} is empty")
    return value


def _rubric(value: object) -> InstanceRubric:
    """One rubric: ``{criteria, score_descriptions: {"1".."5"}}`` or a flat one."""
    if isinstance(value, Mapping) and "score_descriptions" in value:
        extra = sorted(k for k in value if k not in ("criteria", "score_descriptions"))
        if extra:
            raise RubricProblem(f"unknown rubric key {clip(extra[0])}")
        scores = value["score_descriptions"]
        if not isinstance(scores, Mapping):
            raise RubricProblem(f"'score_descriptions' must be an object, got {json_type(scores)}")
        return parse_rubric({"criteria": value.get("criteria"), **scores})
    return parse_rubric(value)


def rubric_names(record: Mapping[str, Any], count: int) -> tuple[str, ...]:
    """The criterion names of a record's ``count`` rubrics: its preferences' dimensions
    when ``preference_set`` gives one distinct usable dimension per rubric, else
    ``rubric_1`` ... ``rubric_<count>``."""
    prefs = record.get("preference_set")
    if isinstance(prefs, list) and len(prefs) == count:
        dims = [p.get("dimension") if isinstance(p, Mapping) else None for p in prefs]
        names = tuple(d for d in dims if isinstance(d, str) and _DIMENSION.fullmatch(d))
        if len(names) == count and len(set(names)) == count:
            return names
    return tuple(f"rubric_{n}" for n in range(1, count + 1))


def _rubrics(record: Mapping[str, Any]) -> dict[str, InstanceRubric]:
    key, value = _field(record, "rubrics")
    if not isinstance(value, list) or not value:
        shown = "an empty list" if isinstance(value, list) else json_type(value)
        raise RubricProblem(f"field {key!r} must be a non-empty list of rubrics, got {shown}")
    parsed: list[InstanceRubric] = []
    for n, item in enumerate(value, 1):
        try:
            parsed.append(_rubric(item))
        except RubricProblem as exc:
            raise RubricProblem(f"field {key!r}, rubric {n}: {exc}") from None
    return dict(zip(rubric_names(record, len(parsed)), parsed, strict=True))


def _instance_id(record: Mapping[str, Any], given: str | None, index: int) -> str:
    if given is not None:
        check_identifier(given, "the key (an instance id)")
    if "id" not in record:
        return given if given is not None else str(index)
    raw = record["id"]
    value = str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else raw
    found = check_identifier(value, "field 'id'")
    if given is not None and found != given:
        raise RubricProblem(f"field 'id' is {clip(found)}; it must equal the key")
    return found


def _instance(iid: str, record: Mapping[str, Any], line: int, reference: bool) -> Instance:
    rubrics = _rubrics(record)
    source = record.get("source")
    task = None if source is None else check_identifier(source, "field 'source'", MAX_DOMAIN)
    has_answer = reference or "reference_answer" in record
    return Instance(
        id=iid,
        instruction=_text(record, "prompt", empty=False),
        answer=_text(record, "reference_answer", empty=True) if has_answer else "",
        skills=tuple(rubrics),
        line=line,
        system_prompt=_text(record, "system", empty=False),
        rubrics=rubrics,
        task=task,
    )


def _model(record: Mapping[str, Any], model: str | None) -> str:
    if model is not None:
        return model
    if "response_model_name" not in record:
        raise RubricProblem(
            "field 'response' without 'response_model_name' (whose response this is); "
            "name the model with --model NAME"
        )
    name = record["response_model_name"]
    if not isinstance(name, str) or _MODEL_NAME.fullmatch(name) is None:
        raise RubricProblem(
            f"response_model_name {clip(name)} is not a valid model name (letters, digits, "
            "'.', '_' or '-'); name the model with --model NAME"
        )
    return name


def load_multifaceted(
    path: str, model: str | None = None, *, reference: bool = True
) -> tuple[list[Instance], list[ResponseSet]]:
    """Multifaceted Bench instances (file order) and the responses the file carries.

    Records without a ``response`` add an instance only; ``model`` names the model of
    every response in the file (else each record's ``response_model_name``).
    ``reference`` False: a record may leave ``reference_answer`` out.
    """
    if model is not None and _MODEL_NAME.fullmatch(model) is None:
        raise InputError(f"invalid model name {clip(model)}; use letters, digits, '.', '_' or '-'")
    instances: list[Instance] = []
    first: dict[str, str] = {}
    by_model: dict[str, list[Response]] = {}
    for index, (given, line, where, record) in enumerate(_records(path)):
        try:
            iid = _instance_id(record, given, index)
            label = where or f"line {line}"
            if iid in first:
                raise RubricProblem(f"instance id {clip(iid)} also on {first[iid]}")
            first[iid] = label
            instances.append(_instance(iid, record, line or 0, reference))
            if "response" in record:
                text = _text(record, "response", empty=True)
                name = _model(record, model)
                by_model.setdefault(name, []).append(Response(name, iid, text))
        except RubricProblem as exc:
            raise InputError(f"{where}: {exc}" if where else str(exc), path, line) from None
    sets = [ResponseSet(name, path, tuple(items)) for name, items in by_model.items()]
    return instances, sets
