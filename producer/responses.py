"""A model's responses file, validated once and read again when its texts are needed.

A run of millions of judgments is made of many responses, each written to the store once:
holding their texts from validation to the write would make the producer's memory grow
with the run (~1 KB per judgment, docs/design/scale.md). :func:`load_responses` checks a
whole file line by line and keeps only the instance ids it answers (each the instance's
own string: a pointer per response); :class:`FileResponses` reads the texts again, line by
line, whenever they are iterated (to fingerprint the run, to write it), checking that the
file still holds what was validated.

A responses file is JSON Lines, one ``question_id`` + ``text`` per line (extra fields are
ignored); every id must name an instance, at most once per file.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.jsonl import read_json_lines
from flask_eval.core.text import clip
from flask_eval.core.types import Response, ResponseSet, ResponseSource
from flask_eval.producer.loaders import _field, _record_id, _string

__all__ = ["FileResponses", "load_responses", "only"]

_HINT = "a response needs question_id and text"
_CHANGED = "the file changed after it was validated; run again"
#: a validated line's parser (json.loads's C scanner without its Python wrapping)
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _stamp(path: str) -> tuple[int, int]:
    """What says a file was not changed since it was validated: its size and mtime."""
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def _read(record: dict[str, Any], path: str, line: int) -> tuple[str, str]:
    """One line's (question id, text), checked; InputError naming the line."""
    qid = _record_id(_field(record, "question_id", path, line, _HINT), "question_id", path, line)
    text = _string(_field(record, "text", path, line, _HINT), "text", path, line, allow_empty=True)
    return qid, text


@dataclass(frozen=True, eq=False)
class FileResponses(ResponseSource):
    """The responses of one validated file, its texts read again on each iteration.

    ``ids`` are the instance ids of the file's responses, in file order; ``keep`` (None:
    all) the ids a selection kept (``--limit``, ``--sample``, and the instances file
    itself: ``unknown`` responses answer instances it does not have, and are left out as
    a selection leaves them). Iterating yields the kept responses in file order; a file
    changed since its validation raises InputError (the caller's transaction then writes
    nothing).
    """

    model: str
    path: str
    ids: tuple[str, ...]
    stamp: tuple[int, int]
    keep: frozenset[str] | None = None
    #: each response's length in characters, in file order (``ids``'): what a sampled
    #: estimate counts without reading the texts again
    lengths: array[int] = field(default_factory=lambda: array("I"))
    #: responses to instances not in the instances file (ignored)
    unknown: int = 0

    def __len__(self) -> int:
        if self.keep is None:
            return len(self.ids)
        return sum(1 for i in self.ids if i in self.keep)

    def __contains__(self, item: object) -> bool:
        return isinstance(item, Response) and item in set(self)

    def __iter__(self) -> Iterator[Response]:
        for line, qid, text in self._records(None):
            yield Response(self.model, qid, text, line)

    def sizes(self) -> Iterator[tuple[str, int]]:
        """The kept responses' (instance id, length in characters), in file order, from
        their validation (no read)."""
        keep = self.keep
        if len(self.lengths) != len(self.ids):
            raise ValueError("a FileResponses made without its lengths")
        pairs = zip(self.ids, self.lengths, strict=True)
        return pairs if keep is None else ((q, n) for q, n in pairs if q in keep)

    def texts(self, wanted: Collection[str]) -> dict[str, str]:
        """The texts of the kept responses to ``wanted`` (instance ids), read again with
        the checks of iteration; the other lines are not parsed."""
        return {qid: text for _, qid, text in self._records(set(wanted))}

    def _records(self, wanted: set[str] | None) -> Iterator[tuple[int, str, str]]:
        """(line, instance id, text) of the kept responses (and of ``wanted`` only, unless
        None), in file order; InputError when the file changed since its validation."""
        changed = InputError(_CHANGED, self.path)
        try:
            if _stamp(self.path) != self.stamp:
                raise changed
        except OSError:
            raise changed from None
        expected = iter(self.ids)
        keep = self.keep
        # validated already, and unchanged since (its size and mtime): read plainly, each
        # line read checked against the id validated there
        try:
            handle = open(self.path, "rb")  # noqa: SIM115  (closed below)
        except OSError:
            raise changed from None
        with handle:
            for line, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                want = next(expected, None)
                if want is None:
                    raise InputError(_CHANGED, self.path, line)
                if keep is not None and want not in keep:
                    continue
                if wanted is not None and want not in wanted:
                    continue
                try:
                    record, _ = _SCAN(raw.decode().removeprefix("\ufeff"), 0)
                    question, text = record["question_id"], record["text"]
                except (ValueError, KeyError, TypeError, StopIteration):
                    raise InputError(_CHANGED, self.path, line) from None
                qid = question if isinstance(question, str) else str(question)
                if want != qid or not isinstance(text, str):
                    raise InputError(_CHANGED, self.path, line)
                yield line, qid, text
        if next(expected, None) is not None:
            raise changed

    def instance_ids(self) -> tuple[str, ...]:
        keep = self.keep
        return self.ids if keep is None else tuple(i for i in self.ids if i in keep)


def only(rs: ResponseSet, ids: Collection[str]) -> ResponseSet:
    """``rs`` with the responses to ``ids`` only (a file's texts stay unread)."""
    responses = rs.responses
    if isinstance(responses, FileResponses):
        keep = frozenset(ids) if responses.keep is None else responses.keep & frozenset(ids)
        kept = FileResponses(
            responses.model,
            responses.path,
            responses.ids,
            responses.stamp,
            keep,
            responses.lengths,
            responses.unknown,
        )
        return ResponseSet(rs.model, rs.path, kept)
    return ResponseSet(rs.model, rs.path, tuple(r for r in responses if r.instance_id in ids))


def load_responses(model: str, path: str, instance_ids: Collection[str]) -> ResponseSet:
    """Validate one model's responses file; its texts are read again when iterated.

    Every ``question_id`` must appear at most once; the text may be empty (empty
    responses are judged like any other). A response to an instance not in
    ``instance_ids`` is ignored (a hand-picked subset of instances given with full
    responses files), as ``--limit`` ignores the instances it leaves out; a file none of
    whose responses answers one of ``instance_ids`` is refused. Raises InputError naming
    the file and line of the first problem.
    """
    canonical: Mapping[str, str] = (
        instance_ids if isinstance(instance_ids, dict) else {i: i for i in instance_ids}
    )
    first_line: dict[str, int] = {}
    ids: list[str] = []
    try:
        stamp = _stamp(path)
    except OSError:
        stamp = (-1, -1)  # read_json_lines says why the file cannot be read
    lengths = array("I")
    ignored: set[str] = set()
    for line, record in read_json_lines(path):
        qid, text = record.get("question_id"), record.get("text")
        if type(text) is str and (type(qid) is str or type(qid) is int):
            # the usual line: an instance's id (checked with the instances), once
            known = canonical.get(qid if type(qid) is str else str(qid))
            if known is not None and known not in first_line:
                first_line[known] = line
                ids.append(known)
                lengths.append(len(text))
                continue
        qid, text = _read(record, path, line)
        previous = first_line.get(qid)
        if previous is not None:
            raise InputError(
                f"duplicate response for instance {clip(qid)} (first on line {previous}); "
                "keep one response per instance",
                path,
                line,
            )
        known = canonical.get(qid)
        first_line[qid if known is None else known] = line
        ids.append(qid if known is None else known)
        lengths.append(len(text))
        if known is None:
            ignored.add(qid)
    if ignored and len(ignored) == len(ids):
        raise InputError(
            f"none of its {len(ids)} responses answers an instance of the instances file "
            "(check that the responses match the instances file)",
            path,
        )
    keep = frozenset(i for i in ids if i not in ignored) if ignored else None
    source = FileResponses(model, path, tuple(ids), stamp, keep, lengths, len(ignored))
    return ResponseSet(model, path, source)
