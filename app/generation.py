"""What a generation run produced: each model's responses, with the sampling settings
they were asked with, their tokens and cost, and whether the model's token limit cut
them off; as response sets for a judging run and as FLASK's model-output JSON Lines.

A response cut off by its limit is kept and marked (``cut_off``, ``finish: length``):
`flask-eval run` and `eval` say how many of a model's responses were cut off before they
are judged, so a partial answer is never silently judged as a whole one.
"""

from __future__ import annotations

import json
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
    from: the generation run), each in ``instance_order``."""
    rank = {iid: k for k, iid in enumerate(instance_order)}
    sets = []
    for model, items in responses.items():
        ordered = sorted(items, key=lambda g: rank.get(g.instance_id, len(rank)))
        sets.append(
            ResponseSet(
                model, source, tuple(Response(model, g.instance_id, g.text) for g in ordered)
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
    in ``out_dir``. Written to a temporary name first, so a file is whole or absent."""
    configs = {j.name: j for j in run.config.judges}
    priced = {name: c.price is not None for name, c in configs.items()}
    target = Path(out_dir)
    if target.exists() and not target.is_dir():
        raise InputError(f"--out {out_dir}: not a directory")
    target.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for model, items in responses.items():
        settings = sampling(configs[model]) if model in configs else {}
        path = target / f"{model.replace('/', '_')}.jsonl"
        with replaced_whole(path) as handle:
            for g in items:
                record = {
                    "question_id": flask_id(g.instance_id),
                    "text": g.text,
                    "model": model,
                    "finish": g.finish,
                    "cut_off": g.cut_off,
                    "usage": {
                        "prompt_tokens": g.prompt_tokens,
                        "completion_tokens": g.completion_tokens,
                        # a model without a price: its cost is unknown, not 0
                        "cost": round(g.cost, 8) if priced.get(model, True) else None,
                    },
                    "sampling": settings,
                }
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        written[model] = path
    return written


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
