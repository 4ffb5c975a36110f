"""Subsets of an instance set for quick tries: ``--limit N`` and ``--sample N --seed S``.

Both are deterministic: ``--limit`` keeps the first N instances in file order, ``--sample``
a uniform random N of them (the same N for the same seed), also kept in file order.
Responses are validated against the whole instances file first (a typo in an id is still
an error), then those for instances outside the selection are ignored.
"""

from __future__ import annotations

import random

from flask_eval.core.errors import InputError
from flask_eval.producer.inputs import Inputs
from flask_eval.producer.responses import only


def select(
    inputs: Inputs, limit: int | None = None, sample: int | None = None, seed: int = 0
) -> Inputs:
    if limit is not None and sample is not None:
        raise InputError("--limit and --sample are exclusive; give one of them")
    n = limit if limit is not None else sample
    if n is None:
        return inputs
    if n < 1:
        raise InputError(f"--{'limit' if limit is not None else 'sample'} must be at least 1")
    if limit is not None:
        kept = inputs.instances[:n]
    else:
        chosen = set(
            random.Random(seed).sample(range(len(inputs.instances)), min(n, len(inputs.instances)))
        )
        kept = tuple(i for k, i in enumerate(inputs.instances) if k in chosen)
    ids = {i.id for i in kept}
    response_sets = tuple(only(rs, ids) for rs in inputs.response_sets)
    return Inputs(tuple(kept), response_sets, about_instances=inputs.about_instances)
