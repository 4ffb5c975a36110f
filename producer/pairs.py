"""Pairwise plans: which ordered model pairs a ``--pairwise`` run compares.

``--pairwise all`` compares every unordered pair of models; ``--pairwise baseline:NAME``
compares each other model with the baseline ``NAME``. Each comparison is judged in both
orders unless swapping is turned off: the ordered pairs ``(A, B)`` and ``(B, A)``, where
the first model's response is shown first. Without the swap, ``all`` shows the model
given first on the command line first, and ``baseline`` shows the model under test
first and the baseline second. Orders are deterministic (the models' order), so a plan
and its ledger are the same on every run.

The ledger then holds one row per (instance answered by both models, ordered pair,
criterion of the instance, judge) (``storage.planning``); :func:`planned_pairwise_rows`
gives the same rows without a store, for ``--dry-run`` and ``--max-cost`` estimates.
The number of pairs grows as N^2 with ``all`` (N (N - 1) ordered pairs with the swap),
as N with ``baseline``: :func:`describe_plan` says so before anything is spent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.stored import StoredPairwise
from flask_eval.core.text import clip
from flask_eval.producer.inputs import Inputs, check_model_name
from flask_eval.storage.planning import Pair, answered_pairs
from flask_eval.storage.records import OpenRow

__all__ = [
    "PLANS",
    "Pair",
    "check_pairs_answered",
    "describe_plan",
    "pairwise_config",
    "parse_pairwise_arg",
    "plan_pairs",
    "planned_pairwise_rows",
    "shared_instances",
]

PLANS = ("all", "baseline")
_USAGE = "expected --pairwise all or --pairwise baseline:NAME"
#: pairs named in one error line at most
_SHOWN = 5


def parse_pairwise_arg(text: str) -> tuple[str, str | None]:
    """``all`` -> ``("all", None)``; ``baseline:NAME`` -> ``("baseline", NAME)``;
    InputError (one line) otherwise."""
    value = text.strip()
    if value == "all":
        return "all", None
    head, sep, name = value.partition(":")
    if head == "baseline":
        if not sep or not name.strip():
            raise InputError(f"--pairwise baseline needs the baseline model: {_USAGE}")
        name = name.strip()
        check_model_name(name)
        return "baseline", name
    raise InputError(f"invalid --pairwise value {clip(text)}: {_USAGE}")


def _names(names: Sequence[str]) -> str:
    """Model names (validated: letters, digits, '.', '_', '-') or pairs of them, the first
    :data:`_SHOWN` of them."""
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(n[:200] for n in names[:_SHOWN]) + more


def plan_pairs(models: Sequence[str], plan: str, baseline: str | None, swap: bool) -> list[Pair]:
    """The ordered pairs ``(shown first, shown second)`` of a plan (see the module
    docstring); InputError for fewer than 2 models, a repeated model, or a baseline not
    among the models."""
    if plan not in PLANS:
        raise InputError(f"unknown pairwise plan {clip(plan)}: {_USAGE}")
    if len(set(models)) != len(models):
        repeated = sorted({m for m in models if list(models).count(m) > 1})
        raise InputError(f"model {clip(repeated[0])} is given twice; compare each model once")
    if len(models) < 2:
        got = f"1 ({clip(models[0])})" if models else "none"
        raise InputError(
            f"--pairwise needs at least 2 models, got {got}; pass two or more responses "
            "files (NAME=PATH)"
        )
    if plan == "all":
        if baseline is not None:
            raise InputError(f"--pairwise all takes no baseline (got {clip(baseline)}): {_USAGE}")
        pairs: list[Pair] = []
        for i, first in enumerate(models):
            for second in models[i + 1 :]:
                pairs += [(first, second), (second, first)] if swap else [(first, second)]
        return pairs
    if baseline is None:
        raise InputError(f"--pairwise baseline needs the baseline model: {_USAGE}")
    if baseline not in models:
        near = [m for m in models if m.casefold() == baseline.casefold()]
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise InputError(
            f"--pairwise baseline {clip(baseline)} is not among the models{hint}: {_names(models)}"
        )
    pairs = []
    for model in models:
        if model != baseline:
            pairs += [(model, baseline), (baseline, model)] if swap else [(model, baseline)]
    return pairs


def shared_instances(inputs: Inputs, pairs: Sequence[Pair]) -> dict[frozenset[str], int]:
    """For each compared pair of models (either order), the instances both answered."""
    answered: dict[str, set[str]] = {}
    for rs in inputs.response_sets:
        answered.setdefault(rs.model, set()).update(rs.instance_ids())
    ids = {i.id for i in inputs.instances}
    return {
        frozenset(p): len(answered.get(p[0], set()) & answered.get(p[1], set()) & ids)
        for p in dict.fromkeys(pairs)
    }


def check_pairs_answered(inputs: Inputs, pairs: Sequence[Pair]) -> None:
    """InputError (one line, naming them) when a compared pair of models has no instance
    that both answered: such a pair could never be judged."""
    order = {rs.model: n for n, rs in enumerate(inputs.response_sets)}
    empty = [
        "-".join(sorted(pair, key=lambda m: (order.get(m, len(order)), m)))
        for pair, n in shared_instances(inputs, pairs).items()
        if n == 0
    ]
    if not empty:
        return
    what = "pair" if len(empty) == 1 else "pairs"
    raise InputError(
        f"no instance has responses from both models of {what} {_names(empty)}; a compared "
        "pair needs responses to at least one shared instance (check the responses files, "
        "or leave a model out)"
    )


def planned_pairwise_rows(
    inputs: Inputs, pairs: Sequence[Pair], judges: Sequence[str]
) -> list[OpenRow]:
    """The ledger rows a fresh pairwise run plans (id 0, ``model_b`` set), by judge,
    then pair, instance and criterion: what ``Store.create_run(..., pairs=pairs)``
    inserts, without a store."""
    planned = list(answered_pairs(inputs.instances, inputs.response_sets, pairs))
    return [
        OpenRow(0, first, second, instance.id, criterion, judge)
        for judge in judges
        for first, second, instance in planned
        for criterion in instance.skills
    ]


def pairwise_config(plan: str, baseline: str | None, swap: bool) -> dict[str, Any]:
    """The run configuration's ``"pairwise"`` entry (absent: absolute grading)."""
    return {"plan": plan, "baseline": baseline, "swap": swap}


def describe_plan(models: Sequence[str], config: StoredPairwise, pairs: Sequence[Pair]) -> str:
    """One line for ``--dry-run``: how many comparisons the plan makes and how they grow."""
    n = len(models)
    orders = "both orders" if config.swap else "one order"
    if config.plan == "baseline":
        growth = f"each of {n - 1} models vs {config.baseline}: grows as N"
    else:
        growth = f"all {n * (n - 1) // 2} pairs of {n} models: grows as N^2"
    return f"pairwise: {len(pairs)} ordered comparisons per shared instance ({growth}, {orders})"
