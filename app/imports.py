"""Reference ratings from the formats the benchmarks ship, beside our own CSV / JSON Lines
reference files (``report.references``): what ``--reference NAME=PATH`` reads.

- a Prometheus eval set (MT-Bench, Vicuna Bench: a JSON list of filled prompts with
  ``gpt4_score``): GPT-4's scores, the mean of its three runs, as rater NAME;
- a BiGGen Bench evals file (a JSON dict of records with ``eval_model_name`` and
  ``score``): one rater per evaluator LM, called NAME/EVALUATOR;
- a FLASK review file (JSON Lines of GPT-4 reviews with a per-skill ``score`` object):
  FLASK's own GPT-4 judgments of one model, as rater NAME;
- anything else: our reference format.

The format is told from the file's first record only; each importer then validates the
whole file (one line naming file:line or file and key, exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

from flask_eval.core.errors import InputError
from flask_eval.core.files import open_input
from flask_eval.producer.biggen import load_biggen_evals
from flask_eval.producer.flask_reviews import load_reviews
from flask_eval.producer.prometheus_sets import load_prometheus_set
from flask_eval.report import references
from flask_eval.report.references import Reference, ReferenceScore
from flask_eval.rubrics.skills import load_default

#: bytes read to tell a file's format
_PEEK = 64 * 1024


def _first_record(path: str) -> object:
    """The file's first record (a JSON Lines line, a list's first item, or the first value
    of a dict keyed by id), or None when it cannot be told from the file's start."""
    try:  # never open() a FIFO: it would block (core/files.py)
        with open_input(path, "a reference file") as f:
            head = f.read(_PEEK).decode("utf-8", errors="replace")
    except (OSError, InputError):
        return None  # the importer says what is wrong with the path
    decoder = json.JSONDecoder()
    text = head.lstrip("\ufeff \t\r\n")
    try:  # one whole JSON Lines record
        value, _ = decoder.raw_decode(text.splitlines()[0] if text else "")
        if isinstance(value, dict) and not all(isinstance(v, dict) for v in value.values()):
            return value
    except json.JSONDecodeError:
        pass
    if not text.startswith(("[", "{")):
        return None
    body = text[1:].lstrip()
    try:
        value, end = decoder.raw_decode(body)
        if text[0] == "{" and isinstance(value, str):  # a key: its value is the record
            rest = body[end:].lstrip().removeprefix(":").lstrip()
            value, _ = decoder.raw_decode(rest)
    except json.JSONDecodeError:
        return None
    return value


def _kind(path: str) -> str:
    first = _first_record(path)
    if not isinstance(first, dict):
        return "ours"
    if "gpt4_score" in first and "instruction" in first:
        return "prometheus-set"
    if "eval_model_name" in first:
        return "biggen-evals"
    if isinstance(first.get("score"), dict):
        return "flask-review"
    return "ours"


def load_reference(name: str, path: str) -> list[Reference]:
    """The reference ratings in ``path``, named ``name`` (see the module docstring)."""
    kind = _kind(path)
    if kind == "prometheus-set":
        return list(load_prometheus_set(path, evaluator=name).references)
    if kind == "biggen-evals":
        return [
            Reference(f"{name}/{ref.name}", ref.path, ref.scores) for ref in load_biggen_evals(path)
        ]
    if kind == "flask-review":
        reviews = load_reviews(path, load_default().names, judge=name)
        scores = tuple(
            ReferenceScore(r.model, r.instance_id, r.skill, r.score, r.line)
            for r in reviews.reviews
        )
        return [Reference(name, path, scores)]
    return [references.load(name, path)]


def load_references(args: list[str] | tuple[str, ...]) -> list[Reference]:
    """Every ``NAME=PATH`` of ``--reference``."""
    loaded: list[Reference] = []
    for arg in args:
        name, path = references.parse_arg(arg)
        if not Path(path).is_file():
            loaded.append(references.load(name, path))  # its own message for a missing file
            continue
        loaded += load_reference(name, path)
    return loaded
