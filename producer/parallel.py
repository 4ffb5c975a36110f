"""Validating many responses files at once, one process per core.

A 10M-judgment plan is hundreds of responses files; each line costs a few microseconds of
JSON parsing and checks, all of it CPU (docs/design/producer-scale.md). With more than
:data:`MIN_FILES` files and more than one core, the files are validated in forked
processes, in order: each child runs :func:`responses.load_responses` on whole files and
sends back the positions of the instances answered (4 bytes a response) and the texts'
lengths, which the parent turns back into the instances' own id strings (so memory is
what one process validating them would hold). The first bad file in the arguments' order
raises its InputError, exactly as one process would; nothing is written either way.

Forking is only done where it is safe: a platform with ``fork``, a process that is not a
daemon (a worker's child) and has no other thread. Otherwise, or if a child dies (its
pool broken), files are validated one after another, in this process.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from array import array
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import NamedTuple

from flask_eval.core.errors import InputError
from flask_eval.core.types import ResponseSet
from flask_eval.producer.responses import FileResponses, load_responses

__all__ = ["MIN_FILES", "load_all_responses"]

#: fewer files than this are validated in this process (a fork costs more than they do)
MIN_FILES = 8


class _Answer(NamedTuple):
    """A child's answer for one file: the positions of the instances answered, the
    texts' lengths and the file's stamp, or the (message, path, line) of its error."""

    positions: array[int]
    lengths: array[int]
    stamp: tuple[int, int]
    error: tuple[str, str | None, int | None] | None = None
    #: ids of responses to instances not in the instances file (ignored), numbered in
    #: ``positions`` after the instances'
    unknown: tuple[str, ...] = ()


# what the children inherit through fork: the instances' ids and their positions
_IDS: Mapping[str, str] = {}
_POSITIONS: dict[str, int] = {}


def load_all_responses(
    responses: Sequence[tuple[str, str]], ids: Mapping[str, str]
) -> tuple[ResponseSet, ...]:
    """Every ``(model, path)`` responses file validated against ``ids`` (instance id ->
    the instance's own id string), in parallel where it pays and is safe."""
    workers = min(_cores(), len(responses))
    if workers >= 2 and len(responses) >= MIN_FILES and _can_fork():
        try:
            return _in_children(responses, ids, workers)
        except BrokenProcessPool:  # a child was killed (memory?): one process, in here
            pass
    return tuple(load_responses(name, path, ids) for name, path in responses)


def _in_children(
    responses: Sequence[tuple[str, str]], ids: Mapping[str, str], workers: int
) -> tuple[ResponseSet, ...]:
    global _IDS, _POSITIONS
    own = list(ids.values())
    _IDS, _POSITIONS = ids, {key: n for n, key in enumerate(own)}
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    try:
        out = []
        for (name, path), got in zip(responses, pool.map(_validate, responses), strict=True):
            if got.error is not None:
                raise InputError(*got.error)
            every = (*own, *got.unknown)
            kept = tuple(every[n] for n in got.positions)
            keep = frozenset(own[n] for n in got.positions if n < len(own)) if got.unknown else None
            source = FileResponses(name, path, kept, got.stamp, keep, got.lengths, len(got.unknown))
            out.append(ResponseSet(name, path, source))
        return tuple(out)
    finally:
        # a bad file stops here: the files not started are dropped, not validated
        pool.shutdown(wait=False, cancel_futures=True)
        _IDS, _POSITIONS = {}, {}


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _can_fork() -> bool:
    return (
        "fork" in multiprocessing.get_all_start_methods()
        and not multiprocessing.current_process().daemon
        and threading.active_count() == 1
    )


def _validate(job: tuple[str, str]) -> _Answer:
    """In a child: one file validated; its positions, lengths and stamp, or its error."""
    name, path = job
    try:
        loaded = load_responses(name, path, _IDS).responses
    except InputError as exc:
        return _Answer(array("I"), array("I"), (0, 0), (exc.message, exc.path, exc.line))
    assert isinstance(loaded, FileResponses)
    unknown = tuple(dict.fromkeys(i for i in loaded.ids if i not in _POSITIONS))
    extra = {i: len(_POSITIONS) + k for k, i in enumerate(unknown)}
    positions = array("I", (_POSITIONS.get(i, extra.get(i, 0)) for i in loaded.ids))
    return _Answer(positions, loaded.lengths, loaded.stamp, unknown=unknown)
