"""What an annotation run produced: each annotator's labels per instance, combined across
annotators (report/annotation.py: a rank aggregation for skills, majority for domains and
difficulty, every broken tie stated), written as FLASK's instance file, ready for `run`;
and their agreement with given labels (`annotate --compare`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from flask_eval.app.conversation_records import conversation_record, grouped
from flask_eval.app.generation import flask_id
from flask_eval.app.jobs import check_kind, done_values, labelled
from flask_eval.core.files import replaced_whole
from flask_eval.core.images import attached
from flask_eval.core.types import DIFFICULTY_LABELS, Instance
from flask_eval.producer.loaders import load_instances
from flask_eval.report.annotation import Combined, Labels, combine
from flask_eval.rubrics import kinds
from flask_eval.rubrics.annotation import LabelSpace, options_label_space
from flask_eval.rubrics.labels import flask_label_space
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from flask_eval.workers.providers.images import data_uri


def given_labels(store: Store, run: RunInfo) -> dict[str, dict[str, Labels]]:
    """Instance id -> annotator -> the labels it gave (a facet it failed to give is
    empty: ``skills``/``domains`` ``()``, ``difficulty`` None)."""
    check_kind(run, kinds.ANNOTATION)
    facets: dict[str, dict[str, dict[str, Any]]] = {}
    for row in done_values(store, run):
        if row.value is None:
            continue
        facets.setdefault(row.instance_id, {}).setdefault(row.judge, {})[row.criterion] = (
            json.loads(row.value)
        )
    return {
        iid: {
            who: Labels(
                skills=tuple(given.get("skills") or ()),
                domains=tuple(given.get("domains") or ()),
                difficulty=given.get("difficulty"),
            )
            for who, given in by_who.items()
        }
        for iid, by_who in facets.items()
    }


def label_space(run: RunInfo) -> LabelSpace:
    """The label space the run's annotators chose from."""
    space = options_label_space(run.config.kind_options)
    return space if space is not None else flask_label_space()


def combined(store: Store, run: RunInfo) -> dict[str, Combined]:
    """Instance id -> its annotators' labels combined (ties stated)."""
    space = label_space(run)
    order = [name for name, _ in space.skills]
    return {
        iid: combine(by_who, order, top=space.top_skills, max_domains=space.max_domains)
        for iid, by_who in given_labels(store, run).items()
    }


def apply(instances: Sequence[Instance], labels: Mapping[str, Combined]) -> list[Instance]:
    """``instances`` with the combined labels of those annotated; an instance whose
    combined labels miss a facet keeps what it had for that facet."""
    out = []
    for i in instances:
        c = labels.get(i.id)
        if c is None:
            out.append(i)
            continue
        got = c.labels
        out.append(
            replace(
                i,
                skills=got.skills or i.skills,
                domains=got.domains or i.domains,
                difficulty=got.difficulty if got.difficulty is not None else i.difficulty,
            )
        )
    return out


def write_instances(
    instances: Iterable[Instance],
    path: str,
    labels: Mapping[str, Combined],
    annotators: Sequence[str],
    custom: bool = False,
) -> int:
    """``instances`` as FLASK's current instance schema (``idx``, ``instruction``,
    ``answer``, ``skill``, ``domain``, ``difficulty`` as FLASK's level name), ready for
    `run`; with ``custom`` criteria as the skill labels, the skills go in ``criteria``
    (what `run --criteria` reads). An annotated instance also carries ``annotation``:
    its annotators and the ties broken to combine them; its own rubrics and its images
    (as ``data:`` URIs, the bytes read) go along. A conversation's turns are one
    record (``app.conversation_records``: they are not annotated). Written whole or not
    at all; returns the instances written that still lack a facet."""
    lacking = 0
    with replaced_whole(path) as handle:
        for i in grouped(instances):
            if isinstance(i, list):  # a conversation: one record, as it was read
                whole = conversation_record(i, "criteria" if custom else "skills")
                handle.write(json.dumps(whole, ensure_ascii=False) + "\n")
                continue
            lacking += not labelled(i)
            record: dict[str, Any] = {
                "idx": flask_id(i.id),
                "instruction": i.instruction,
                "answer": i.answer,
                "criteria" if custom else "skill": list(i.skills),
                "domain": list(i.domains) or [-1],
                "difficulty": DIFFICULTY_LABELS[i.difficulty - 1] if i.difficulty else -1,
            }
            if i.system_prompt:
                record["system_prompt"] = i.system_prompt
            if i.rubrics:
                record["rubrics"] = {
                    name: {"criteria": r.criteria, **{str(k): v for k, v in r.scores.items()}}
                    for name, r in i.rubrics.items()
                }
            if i.images:  # self-contained: the file may be read far from the images' folder
                images = attached(i.images)
                if len(images) != len(set(i.images)):  # never written without its images
                    raise ValueError(f"instance {i.id}: its images' bytes were not read")
                by_digest = {image.ref.sha256: image for image in images}
                record["images"] = [data_uri(by_digest[ref.sha256]) for ref in i.images]
            c = labels.get(i.id)
            if c is not None:
                record["annotation"] = {"annotators": list(annotators), "ties": list(c.ties)}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return lacking


def gold_labels(path: str, skill_names: Sequence[str]) -> dict[str, Labels]:
    """The labels a FLASK instance file gives (``annotate --compare``), by instance id."""
    loaded = load_instances(path, skill_names, metadata=False)
    return {i.id: Labels(i.skills, i.domains, i.difficulty) for i in loaded}
