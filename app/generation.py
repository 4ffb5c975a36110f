"""What a generation run produced: each model's responses, with the sampling settings
they were asked with, their tokens and cost, and whether the model's token limit cut
them off; as response sets for a judging run and as FLASK's model-output JSON Lines.

A response cut off by its limit is kept and marked (``cut_off``, ``finish: length``):
`flask-eval run` and `eval` say how many of a model's responses were cut off before they
are judged, so a partial answer is never silently judged as a whole one.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask_eval.app.jobs import check_kind, done_values
from flask_eval.core.errors import InputError
from flask_eval.core.files import replaced_whole
from flask_eval.core.types import DEFAULT_MAX_TOKENS, JudgeConfig, Response, ResponseSet
from flask_eval.rubrics import kinds
from flask_eval.rubrics.generation import RESPONSE
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

#: why a provider stopped when the token limit cut the answer off (workers.judge.CUT_OFF)
CUT_OFF = "length"


@dataclass(frozen=True)
class Generated:
    """One response of a model under test, as the ledger holds it."""

    model: str
    instance_id: str
    text: str
    finish: str | None
    prompt_tokens: int
    completion_tokens: int
    cost: float
    #: a turn of a conversation (``core.conversations``): the conversation, the turn's
    #: number and the model's own answers to the turns before it (what it was asked with)
    conversation: str | None = None
    turn: int | None = None
    history: tuple[str, ...] = ()

    @property
    def cut_off(self) -> bool:
        return self.finish == CUT_OFF


def generated(store: Store, run: RunInfo) -> dict[str, list[Generated]]:
    """Model -> its responses, in the order of the run's models and instances (a
    response not generated yet, or whose generation failed, is absent)."""
    check_kind(run, kinds.GENERATION)
    by_model: dict[str, list[Generated]] = {name: [] for name in run.config.judge_names}
    for row in done_values(store, run):
        if row.criterion != RESPONSE or row.value is None:
            continue
        by_model.setdefault(row.judge, []).append(
            Generated(
                row.judge,
                row.instance_id,
                row.value,
                row.finish,
                row.prompt_tokens,
                row.completion_tokens,
                row.cost,
            )
        )
    return by_model


def response_sets(
    responses: dict[str, list[Generated]], instance_order: Sequence[str], source: str
) -> list[ResponseSet]:
    """The responses as a judging run's response sets (``source`` names where they come
    from: the generation run), each in ``instance_order``; a turn of a conversation
    carries the model's answers to the turns before it (``Response.history``)."""
    rank = {iid: k for k, iid in enumerate(instance_order)}
    sets = []
    for model, items in responses.items():
        ordered = sorted(items, key=lambda g: rank.get(g.instance_id, len(rank)))
        sets.append(
            ResponseSet(
                model,
                source,
                tuple(Response(model, g.instance_id, g.text, history=g.history) for g in ordered),
            )
        )
    return sets


def cut_off_counts(responses: dict[str, list[Generated]]) -> dict[str, int]:
    """Model -> how many of its responses its token limit cut off (models with none are
    left out)."""
    counts = {m: sum(g.cut_off for g in items) for m, items in responses.items()}
    return {m: n for m, n in counts.items() if n}


def sampling(config: JudgeConfig) -> dict[str, Any]:
    """The sampling settings a model under test was asked with."""
    return {
        "spec": config.spec,
        "max_tokens": config.max_tokens or DEFAULT_MAX_TOKENS,
        "temperature": config.temperature if config.temperature is not None else 0.0,
        "batch": config.batch,
    }


def flask_id(instance_id: str) -> int | str:
    """An instance id as FLASK's files write it: an all-digit id as a number (FLASK's
    instances and model outputs number them), any other as it is."""
    return int(instance_id) if instance_id.isdigit() and len(instance_id) < 16 else instance_id


def write_model_outputs(
    responses: dict[str, list[Generated]], run: RunInfo, out_dir: str
) -> dict[str, Path]:
    """Each model's responses as FLASK's model-output JSON Lines (``question_id``,
    ``text``), with what else this run knows of each (sampling settings, tokens, cost,
    ``finish`` and ``cut_off``: fields `run` ignores), one file per model: ``<model>.jsonl``
    in ``out_dir``. A conversation's turns are one record in FastChat's ``model_answer``
    shape (:func:`conversation_record`), where its first turn's response would be.
    Written to a temporary name first, so a file is whole or absent."""
    configs = {j.name: j for j in run.config.judges}
    priced = {name: c.price is not None for name, c in configs.items()}
    target = Path(out_dir)
    if target.exists() and not target.is_dir():
        raise InputError(f"--out {out_dir}: not a directory")
    target.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for model, items in responses.items():
        settings = sampling(configs[model]) if model in configs else {}
        known = priced.get(model, True)
        path = target / f"{model.replace('/', '_')}.jsonl"
        with replaced_whole(path) as handle:
            for group in _records(items):
                if group[0].conversation is None:
                    record = _one_shot_record(group[0], model, known)
                else:
                    record = conversation_record(group, model, known)
                record["sampling"] = settings
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        written[model] = path
    return written


def _records(items: Sequence[Generated]) -> list[list[Generated]]:
    """The responses of one model, one list per record: a one-shot response alone, a
    conversation's turns together (in turn order, from the first, as far as they were
    answered), where its first response comes."""
    groups: list[list[Generated]] = []
    turns: dict[str, list[Generated]] = {}
    for g in items:
        if g.conversation is None:
            groups.append([g])
        elif g.conversation in turns:
            turns[g.conversation].append(g)
        else:
            turns[g.conversation] = [g]
            groups.append(turns[g.conversation])
    kept = [_answered(group) if group[0].conversation is not None else group for group in groups]
    return [group for group in kept if group]


def _answered(group: list[Generated]) -> list[Generated]:
    """A conversation's turns in order, from turn 1 up to the first one missing."""
    by_turn = {g.turn or 1: g for g in group}
    kept: list[Generated] = []
    while len(kept) + 1 in by_turn:
        kept.append(by_turn[len(kept) + 1])
    return kept


def _usage(items: Sequence[Generated], priced: bool) -> dict[str, Any]:
    return {
        "prompt_tokens": sum(g.prompt_tokens for g in items),
        "completion_tokens": sum(g.completion_tokens for g in items),
        # a model without a price: its cost is unknown, not 0
        "cost": round(sum(g.cost for g in items), 8) if priced else None,
    }


def _one_shot_record(g: Generated, model: str, priced: bool) -> dict[str, Any]:
    return {
        "question_id": flask_id(g.instance_id),
        "text": g.text,
        "model": model,
        "finish": g.finish,
        "cut_off": g.cut_off,
        "usage": _usage([g], priced),
    }


def conversation_record(turns: Sequence[Generated], model: str, priced: bool) -> dict[str, Any]:
    """A model's answers to a conversation's turns as FastChat's ``model_answer`` record
    (``question_id``, ``answer_id``, ``model_id``, ``choices: [{index: 0, turns}]``,
    ``tstamp``), with what else the ledger knows of them, turn by turn (``finish``,
    ``cut_off``) and summed (``usage``). ``answer_id`` is a digest of the model and its
    answers (FastChat's is random): the same answers, the same id."""
    conversation = turns[0].conversation or turns[0].instance_id
    texts = [g.text for g in turns]
    digest = hashlib.sha256(json.dumps([model, conversation, texts]).encode()).hexdigest()
    return {
        "question_id": flask_id(conversation),
        "answer_id": digest[:22],
        "model_id": model,
        "choices": [{"index": 0, "turns": texts}],
        "tstamp": round(time.time(), 3),
        "model": model,
        "finish": [g.finish for g in turns],
        "cut_off": [g.cut_off for g in turns],
        "usage": _usage(turns, priced),
    }


def write_biggen_responses(
    responses: dict[str, list[Generated]], source: str, out_dir: str
) -> dict[str, Path]:
    """Each model's responses to BiGGen Bench instances as BiGGen's own responses file
    (the ``source`` records, each with ``response`` and ``response_model_name``), so that
    `run --biggen FILE` judges them on each instance's own rubric: ``<model>.biggen.json``
    in ``out_dir``, with the instances the model answered."""
    with open(source, encoding="utf-8") as handle:
        records: dict[str, Any] = json.load(handle)
    written: dict[str, Path] = {}
    for model, items in responses.items():
        answered = {
            g.instance_id: {
                **records[g.instance_id],
                "response": g.text,
                "response_model_name": model,
            }
            for g in items
            if g.instance_id in records
        }
        path = Path(out_dir) / f"{model.replace('/', '_')}.biggen.json"
        with replaced_whole(path) as handle:
            json.dump(answered, handle, ensure_ascii=False, indent=1)
        written[model] = path
    return written
