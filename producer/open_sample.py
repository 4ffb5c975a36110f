"""The sampled estimate of a stored run's open calls (`resume` of a large metered run).

``Estimator.of_run`` holds every text of the run to render every open call: fine for a
few thousand calls, gigabytes at 10M judgments. Here the open calls are read from the
ledger a page at a time (:func:`plan.open_call_stream`), each counted by the sampler from
the stored lengths of its responses (asked a chunk of calls at a time), and only the
responses of the sampled calls are read (docs/design/estimates.md): the budget is then
kept at the sampled groups' means, as for a new run of that size.
"""

from __future__ import annotations

from itertools import islice

from flask_eval.producer.context import RunContext
from flask_eval.producer.estimate import CallTexts, instance_texts
from flask_eval.producer.plan import open_call_stream
from flask_eval.producer.sampling import CallSampler
from flask_eval.storage.records import PlannedCall, RunInfo
from flask_eval.storage.response_history import response_histories
from flask_eval.storage.response_texts import response_lengths, response_texts
from flask_eval.storage.store import Store

__all__ = ["CHUNK", "sample_open_calls"]

#: open calls whose responses' lengths are asked at once
CHUNK = 20_000


def _responses(call: PlannedCall) -> list[tuple[str, str]]:
    keys = [(call.model, call.instance_id)]
    if call.model_b:
        keys.append((call.model_b, call.instance_id))
    return keys


def sample_open_calls(store: Store, run: RunInfo, **options: int) -> CallSampler:
    """Every open call of ``run`` counted, a sample of them with their texts (``options``:
    the sampler's size, seed, budget); summarize it before asking its costs."""
    context = RunContext.from_config(run.config)
    sampler = CallSampler(context, **options)
    texts = {i.id: instance_texts(i) for i in store.instances(run.id).values()}
    conversations = any(t.history for t in texts.values())
    base: dict[tuple[str, tuple[str, ...]], int] = {}  # the characters but the responses'
    calls = open_call_stream(store, run)
    while chunk := list(islice(calls, CHUNK)):
        keys = {k for call in chunk for k in _responses(call)}
        lengths = response_lengths(store, run.id, keys)
        for call in chunk:
            criteria = tuple(call.criteria)
            own = texts[call.instance_id]
            chars = base.get((call.instance_id, criteria))
            if chars is None:
                chars = base[(call.instance_id, criteria)] = sampler.chars(own, criteria)
            chars += lengths[(call.model, call.instance_id)]
            if call.model_b and context.pairwise:
                chars += lengths.get((call.model_b, call.instance_id), 0)
            key = (call.judge, *criteria)
            if sampler.count(key, chars):
                sampler.take(key, call, own, chars)
    wanted = {k for call in sampler.sampled_calls() for k in _responses(call)}
    read = response_texts(store, run.id, wanted)
    earlier = response_histories(store, run.id, wanted) if conversations else {}

    def filled(call: PlannedCall, own: CallTexts) -> CallTexts:
        iid = call.instance_id
        second = read.get((call.model_b, iid)) if call.model_b else None
        return own._replace(
            response=read[(call.model, iid)],
            response_b=second,
            answers=earlier.get((call.model, iid), ()),
            answers_b=earlier.get((call.model_b, iid), ()) if call.model_b else (),
        )

    sampler.fill(filled)
    return sampler
