"""Recorded answers as the judge of ``judge-eval`` (``recorded:NAME``).

- ``recorded:auto-j-13b``: Auto-J-13B's example predictions on Auto-J's pairwise set,
  shipped with prometheus-eval (``eval/benchmark/autoj_utils/pairwise_example_output.jsonl``
  for the listed order and ``pairwise_exchange_example_output.jsonl`` for the swapped one:
  JSON Lines of ``{"output": 0|1|2}``, line i for comparison i; in the swapped file 0
  means the response shown first, i.e. ``response 2``, is better). :func:`autoj_shown`
  gives each comparison as shown with its recorded verdict: a simulated judge replays
  them through a run (app/judge_eval.py).
- ``recorded:gpt-4``: GPT-4's own scores of MT-Bench and Vicuna Bench (``gpt4_score``,
  the three repetitions behind ``gpt4_feedback``), its first K repetitions (``--samples``)
  as the judge's: with K=3 it meets itself (1.0), with K=1 one run against the mean of
  three, GPT-4's agreement with itself.
"""

from __future__ import annotations

from pathlib import Path

from flask_eval.core.errors import InputError
from flask_eval.core.jsonl import read_json_lines
from flask_eval.producer.judge_eval_sets import ABSOLUTE, AUTOJ, LoadedSet
from flask_eval.producer.pairwise_sets import load_autoj_pairwise
from flask_eval.rubrics.protocol import VERDICT_A, VERDICT_B, VERDICT_TIE_WORD

AUTOJ_13B, GPT_4 = "auto-j-13b", "gpt-4"
RECORDED = (AUTOJ_13B, GPT_4)
PREFIX = "recorded:"
#: --file names of the recorded predictions
AUTOJ_OUTPUT, AUTOJ_EXCHANGE = "autoj-output", "autoj-exchange-output"
RECORDED_FILES = {
    AUTOJ_OUTPUT: "eval/benchmark/autoj_utils/pairwise_example_output.jsonl",
    AUTOJ_EXCHANGE: "eval/benchmark/autoj_utils/pairwise_exchange_example_output.jsonl",
}
#: an output as the verdict by position: 0 the response shown first, 1 the second, 2 a tie
_BY_POSITION = {0: VERDICT_A, 1: VERDICT_B, 2: VERDICT_TIE_WORD}


def recorded_name(spec: str) -> str | None:
    """NAME of ``recorded:NAME`` (InputError for an unknown one), None for a model spec."""
    if not spec.startswith(PREFIX):
        return None
    name = spec.removeprefix(PREFIX)
    if name not in RECORDED:
        raise InputError(
            f"unknown recorded judge {name!r}; choose one of: "
            + ", ".join(PREFIX + n for n in RECORDED)
        )
    return name


def replays(name: str, loaded: LoadedSet) -> bool:
    """Whether the recorded judge ``name`` has answers for the set."""
    if name == AUTOJ_13B:
        return loaded.info.layout == AUTOJ
    return loaded.info.kind == ABSOLUTE


def _outputs(path: str, count: int) -> list[int]:
    out: list[int] = []
    for line, record in read_json_lines(path, "recorded predictions (JSON Lines)"):
        value = record.get("output")
        if isinstance(value, bool) or value not in (0, 1, 2):
            raise InputError("field 'output' must be 0, 1 or 2", path, line)
        out.append(int(value))
    if len(out) != count:
        raise InputError(f"{len(out)} predictions for {count} comparisons of the set", path)
    return out


def autoj_shown(loaded: LoadedSet, output: str, exchange: str) -> list[tuple[str, str, str]]:
    """Both orders of every comparison of Auto-J's set as shown, (the response shown
    first, the one shown second, the recorded verdict ``"A"``, ``"B"`` or ``"tie"``):
    the listed order (``response 1`` first) from ``output``, the swapped one from
    ``exchange``."""
    labels = loaded.labels
    listed, swapped = _outputs(output, len(labels)), _outputs(exchange, len(labels))
    first, second = load_autoj_pairwise(loaded.path).response_sets
    out: list[tuple[str, str, str]] = []
    for one, two, a, b in zip(first.responses, second.responses, listed, swapped, strict=True):
        out.append((one.text, two.text, _BY_POSITION[a]))
        out.append((two.text, one.text, _BY_POSITION[b]))
    return out


def gpt4_scores(loaded: LoadedSet, samples: int, limit: int | None = None) -> dict[int, float]:
    """Record number -> the mean of GPT-4's first ``samples`` scores of it."""
    out: dict[int, float] = {}
    for number in sorted(loaded.records)[:limit]:
        scores = loaded.records[number].gpt4
        if len(scores) < samples:
            raise InputError(
                f"record {number}: {len(scores)} GPT-4 scores, fewer than --samples {samples}",
                loaded.path,
            )
        out[number] = sum(scores[:samples]) / samples
    return out


def recorded_path(data_dir: Path, files: dict[str, str], key: str) -> str:
    """The file of recorded predictions ``key``: ``--file KEY=PATH``, else its place
    under the data folder."""
    return files.get(key) or str(data_dir / RECORDED_FILES[key])
