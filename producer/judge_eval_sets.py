"""Prometheus 2's meta-evaluation sets (``judge-eval``): each set's gold, and the file a
run judges it from.

The sets and their layouts are prometheus-eval's (``eval/benchmark/data_loader.py`` and
``eval/utils.py`` of prometheus-eval/prometheus-eval):

- **absolute** (``mt_bench_eval.json``, ``vicuna_eval.json``, ``flask_eval.json``,
  ``feedback_collection_test.json``, ``feedback_collection_ood_test.json``): records with
  ``instruction`` (a filled Prometheus absolute prompt), ``gpt4_score`` (a list of GPT-4's
  scores, or one score) and, in FLASK's, ``human_score`` (a list). MT-Bench's and Vicuna's
  records also carry ``idx``, ``response_source`` and ``category`` and are judged from the
  file itself (:func:`producer.prometheus_sets.load_prometheus_set`); the others are
  written out in that layout first, one instance per record.
- **pairwise, filled** (``hhh_alignment_eval.json``, ``mt_bench_human_judgement_eval.json``,
  ``preference_collection_ood_test.json``): ``chosen_instruction`` and
  ``rejected_instruction`` (the same filled prompt around two responses), optional
  ``tie`` (1: a tie) and ``source``. Judged as HHH Alignment is
  (:func:`producer.pairwise_sets.load_hhh_alignment`), the chosen response listed first.
- **Auto-J** (``autoj_pairwise.json``, JSON Lines): ``prompt``, ``response 1``,
  ``response 2``, ``label`` 0/1/2 (:func:`producer.pairwise_sets.load_autoj_pairwise`).

Like prometheus-eval's loader, a file is read as one JSON document when it starts with
``[``, as JSON Lines otherwise, and a prompt is stripped of a trailing ``",``. Every
problem raises :class:`~core.errors.InputError` naming the file and the record or line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.files import open_input
from flask_eval.core.jsonl import read_json_lines
from flask_eval.producer.importing import RubricProblem, json_type, read_json_document, score_1_to_5
from flask_eval.producer.pairwise_sets import (
    LABEL_FIRST,
    LABEL_TIE,
    load_autoj_pairwise,
    load_hhh_alignment,
)
from flask_eval.producer.prometheus_sets import load_prometheus_set, parse_filled_prompt
from flask_eval.report.pairwise_labels import Label

#: the repository's folder (producer/ -> the repository)
_REPO = Path(__file__).resolve().parent.parent


def prometheus_data_dir() -> Path:
    """Where prometheus-eval's files are: FLASK_EVAL_PROMETHEUS_DATA, else
    ``shared/prometheus-data`` next to the repository (or next to the folder it sits in)."""
    if "FLASK_EVAL_PROMETHEUS_DATA" in os.environ:
        return Path(os.environ["FLASK_EVAL_PROMETHEUS_DATA"])
    for root in (_REPO.parent, _REPO.parent.parent):
        candidate = root / "shared" / "prometheus-data"
        if candidate.is_dir():
            return candidate
    return _REPO.parent / "shared" / "prometheus-data"


ABSOLUTE, PAIRWISE = "absolute", "pairwise"
#: how a set's file is laid out (the module docstring)
PROMETHEUS, RECORDS, FILLED_PAIRS, AUTOJ = "prometheus", "records", "filled-pairs", "autoj"
#: the model of the one response of a record of a rewritten absolute set
RESPONSE_MODEL = "response"


@dataclass(frozen=True)
class SetInfo:
    """A known set: its name, its file under the data folder, kind and layout."""

    name: str
    file: str
    kind: str
    layout: str


_DATA = "eval/benchmark/data/"
SETS: dict[str, SetInfo] = {
    s.name: s
    for s in (
        SetInfo("vicuna", _DATA + "vicuna_eval.json", ABSOLUTE, PROMETHEUS),
        SetInfo("mt-bench", _DATA + "mt_bench_eval.json", ABSOLUTE, PROMETHEUS),
        SetInfo("flask", _DATA + "flask_eval.json", ABSOLUTE, RECORDS),
        SetInfo("feedback-collection", _DATA + "feedback_collection_test.json", ABSOLUTE, RECORDS),
        SetInfo(
            "feedback-collection-ood",
            _DATA + "feedback_collection_ood_test.json",
            ABSOLUTE,
            RECORDS,
        ),
        SetInfo("hhh", _DATA + "hhh_alignment_eval.json", PAIRWISE, FILLED_PAIRS),
        SetInfo(
            "mt-bench-human", _DATA + "mt_bench_human_judgement_eval.json", PAIRWISE, FILLED_PAIRS
        ),
        SetInfo("autoj", _DATA + "autoj_pairwise.json", PAIRWISE, AUTOJ),
        SetInfo(
            "preference-collection-ood",
            _DATA + "preference_collection_ood_test.json",
            PAIRWISE,
            FILLED_PAIRS,
        ),
    )
}


@dataclass(frozen=True)
class AbsoluteGold:
    """One graded record: its number in the file and the reference's scores."""

    number: int
    gpt4: tuple[float, ...]
    human: tuple[float, ...] = ()


@dataclass(frozen=True)
class LoadedSet:
    """A set ready to judge: the file a run reads it from, and its gold.

    Absolute: ``records`` (by record number) and ``keys`` ((model, instance id) of the
    run -> record number). Pairwise: ``labels`` (report.pairwise_labels) and ``groups``
    (instance id -> HHH source or Auto-J scenario)."""

    info: SetInfo
    path: str
    run_path: str
    records: dict[int, AbsoluteGold] = field(default_factory=dict)
    keys: dict[tuple[str, str], int] = field(default_factory=dict)
    labels: tuple[Label, ...] = ()
    groups: dict[str, str] = field(default_factory=dict)


def read_records(path: str, what: str) -> list[tuple[int, Any]]:
    """(number, record) of a JSON list (numbered from 1) or of JSON Lines (numbered by
    line), as prometheus-eval's loader reads either."""
    with open_input(path, what) as handle:
        try:
            head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        except OSError:
            head = b""
    if head.startswith(b"["):
        data = read_json_document(path, what)
        if not data:
            raise InputError("no records; expected a JSON list of records", path)
        return list(enumerate(data, start=1))
    rows = list(read_json_lines(path, what))
    if not rows:
        raise InputError("no records", path)
    return [(line, record) for line, record in rows]


def _clean(prompt: object, key: str) -> str:
    if not isinstance(prompt, str):
        raise RubricProblem(f"field {key!r} must be a string, got {json_type(prompt)}")
    return prompt.strip().rstrip('",')


def _scores(record: Mapping[str, Any], key: str, required: bool) -> tuple[float, ...]:
    raw = record.get(key)
    if raw is None and not required:
        return ()
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise RubricProblem(f"field {key!r} is an empty list")
    try:
        return tuple(float(score_1_to_5(v)) for v in values)
    except RubricProblem as exc:
        raise RubricProblem(f"field {key!r}: {exc}") from None


def _absolute(info: SetInfo, path: str, work_dir: Path) -> LoadedSet:
    records: dict[int, AbsoluteGold] = {}
    rewritten: list[dict[str, Any]] = []
    for number, record in read_records(path, f"{info.name}: a Prometheus eval set"):
        try:
            if not isinstance(record, dict):
                raise RubricProblem(f"expected an object, got {json_type(record)}")
            gpt4 = _scores(record, "gpt4_score", required=True)
            human = _scores(record, "human_score", required=False)
            prompt = _clean(record.get("instruction"), "instruction")
            try:
                parse_filled_prompt(prompt)
            except RubricProblem as exc:
                raise RubricProblem(f"field 'instruction': {exc}") from None
        except RubricProblem as exc:
            raise InputError(f"record {number}: {exc}", path) from None
        records[number] = AbsoluteGold(number, gpt4, human)
        # the run's loader reads three reference scores per record; the run itself does
        # not use them (the gold stays here)
        three = [round(sum(gpt4) / len(gpt4))] * 3
        rewritten.append(
            {
                "idx": number,
                "response_source": RESPONSE_MODEL,
                "category": str(record.get("category") or info.name),
                "instruction": prompt,
                "gpt4_score": three,
            }
        )
    run_path = path
    if info.layout != PROMETHEUS:
        run_path = str(work_dir / f"{info.name}.json")
        Path(run_path).write_text(json.dumps(rewritten), encoding="utf-8")
    loaded = load_prometheus_set(run_path)
    numbers = sorted(records)
    keys: dict[tuple[str, str], int] = {}
    for rs in loaded.response_sets:
        for r in rs.responses:
            keys[(r.model, r.instance_id)] = numbers[(r.line or 1) - 1]
    return LoadedSet(info, path, run_path, records=records, keys=keys)


def _filled_pairs(info: SetInfo, path: str, work_dir: Path) -> LoadedSet:
    ties: list[bool] = []
    rewritten: list[dict[str, Any]] = []
    for number, record in read_records(path, f"{info.name}: pairs of filled Prometheus prompts"):
        try:
            if not isinstance(record, dict):
                raise RubricProblem(f"expected an object, got {json_type(record)}")
            tie = record.get("tie", 0)
            if tie not in (0, 1) or isinstance(tie, bool):
                raise RubricProblem(f"field 'tie' must be 0 or 1, got {json.dumps(tie)[:40]}")
            pair = {
                k: _clean(record.get(k), k) for k in ("chosen_instruction", "rejected_instruction")
            }
        except RubricProblem as exc:
            raise InputError(f"record {number}: {exc}", path) from None
        ties.append(tie == 1)
        source = record.get("source")
        rewritten.append(
            {"source": source if isinstance(source, str) and source else info.name, **pair}
        )
    run_path = str(work_dir / f"{info.name}.json")
    Path(run_path).write_text(json.dumps(rewritten), encoding="utf-8")
    try:
        loaded = load_hhh_alignment(run_path)
    except InputError as exc:  # name the user's file, not the rewritten one
        raise InputError(str(exc).replace(run_path, path)) from None
    labels = tuple(
        Label(x.instance_id, x.first_model, x.second_model, LABEL_TIE if tie else LABEL_FIRST)
        for x, tie in zip(loaded.labels, ties, strict=True)
    )
    groups = {i.id: i.task for i in loaded.instances if i.task}
    return LoadedSet(info, path, run_path, labels=labels, groups=groups)


def _autoj(info: SetInfo, path: str) -> LoadedSet:
    loaded = load_autoj_pairwise(path)
    labels = tuple(
        Label(x.instance_id, x.first_model, x.second_model, x.label) for x in loaded.labels
    )
    groups = {i.id: i.task for i in loaded.instances if i.task}
    return LoadedSet(info, path, path, labels=labels, groups=groups)


def load_set(info: SetInfo, path: str, work_dir: Path) -> LoadedSet:
    """Read and check one set (rewritten files go to ``work_dir``)."""
    if info.kind == ABSOLUTE:
        return _absolute(info, path, work_dir)
    if info.layout == AUTOJ:
        return _autoj(info, path)
    return _filled_pairs(info, path, work_dir)
