"""Repeated judgments (``run --samples K``, Inspect's epochs): each judge asked K times per
item, each sample a judge of its own in the ledger (docs/design/samples.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from flask_eval.core.errors import InputError
from flask_eval.core.limits import MAX_JUDGE_NAME
from flask_eval.core.text import clip
from flask_eval.core.types import MAX_SAMPLES, JudgeConfig, sample_name


def sampled(judges: Sequence[JudgeConfig], samples: int) -> list[JudgeConfig]:
    """Each judge as ``samples`` judges ``NAME#1`` .. ``NAME#K`` (the judges themselves
    when 1): the ledger holds each sample's judgment as a judge's, and sample k > 1 carries
    its index (``JudgeConfig.sample``), which its calls send as the seed and key the
    answer cache with (workers/context.py); sample 1 keeps the key of a single judgment."""
    if not 1 <= samples <= MAX_SAMPLES:
        raise InputError(f"--samples must be 1 to {MAX_SAMPLES}, not {samples}")
    if samples == 1:
        return list(judges)
    for j in judges:
        if len(sample_name(j.name, samples)) > MAX_JUDGE_NAME:
            raise InputError(
                f"judge name {clip(j.name)} is too long to number its samples "
                f"(at most {MAX_JUDGE_NAME - 3} characters with --samples)"
            )
    return [
        replace(j, name=sample_name(j.name, k), sample=k if k > 1 else None)
        for j in judges
        for k in range(1, samples + 1)
    ]
