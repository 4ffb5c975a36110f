"""A model's responses file, validated once and read again when its texts are needed.

A run of millions of judgments is made of many responses, each written to the store once:
holding their texts from validation to the write would make the producer's memory grow
with the run (~1 KB per judgment, docs/design/scale.md). :func:`load_responses` checks a
whole file line by line and keeps only the instance ids it answers (each the instance's
own string: a pointer per response); :class:`FileResponses` reads the texts again, line by
line, whenever they are iterated (to fingerprint the run, to write it), checking that the
file still holds what was validated.

A responses file is JSON Lines, one ``question_id`` + ``text`` per line (extra fields are
ignored); every id must name an instance, at most once per file. A conversation
(``producer.conversations``) is answered on one line, ``{"id"|"question_id": ..., "turns":
[a1, a2]}`` or FastChat's ``model_answer`` line (``choices[0].turns``), with exactly one
answer per turn of the conversation: it becomes one response per turn (instance id
``core.conversations.turn_id(conv, k)``, text ``a_k``, history ``(a_1, ..., a_{k-1})``),
and a turn is never answered on a line of its own (its history would be missing).
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from flask_eval.core.conversations import split_turn_id, turn_id
from flask_eval.core.errors import InputError
from flask_eval.core.jsonl import read_json_lines
from flask_eval.core.text import clip
from flask_eval.core.types import Response, ResponseSet, ResponseSource
from flask_eval.producer.conversations import is_conversation_answer
from flask_eval.producer.record_fields import record_id, required, string
from flask_eval.producer.response_turns import (
    check_new_conversation,
    check_not_turn,
    conversation_answer,
    turn_of,
)

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
    qid = record_id(required(record, "question_id", path, line, _HINT), "question_id", path, line)
    text = string(required(record, "text", path, line, _HINT), "text", path, line, allow_empty=True)
    return qid, text


def _first_turn(instance_id: str) -> bool:
    """Whether ``instance_id`` may be the first turn of a conversation."""
    if not instance_id.endswith(":t1"):  # most ids: no pattern matched
        return False
    split = split_turn_id(instance_id)
    return split is not None and split[1] == 1


def _answers(record: dict[str, Any]) -> list[Any]:
    """A validated conversation line's answers (KeyError, TypeError, IndexError if the
    line no longer is one)."""
    answers = record["turns"] if "turns" in record else record["choices"][0]["turns"]
    if not isinstance(answers, list):
        raise TypeError
    return answers


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
        for line, qid, text, history in self._records(None):
            yield Response(self.model, qid, text, line, history)

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
        return {qid: text for _, qid, text, _ in self._records(set(wanted))}

    def _records(self, wanted: set[str] | None) -> Iterator[tuple[int, str, str, tuple[str, ...]]]:
        """(line, instance id, text, earlier answers) of the kept responses (and of
        ``wanted`` only, unless None), in file order (a conversation's line gives one per
        turn); InputError when the file changed since its validation."""
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
                if _first_turn(want):  # a conversation's answers on one line, maybe
                    record = self._parse(raw, line)
                    if "text" not in record:
                        yield from self._turns(record, line, want, expected, wanted)
                        continue
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
                yield line, qid, text, ()
        if next(expected, None) is not None:
            raise changed

    def _parse(self, raw: bytes, line: int) -> dict[str, Any]:
        """A validated line's record; InputError if it no longer is one."""
        try:
            record, _ = _SCAN(raw.decode().removeprefix("\ufeff"), 0)
        except (ValueError, StopIteration):
            raise InputError(_CHANGED, self.path, line) from None
        if not isinstance(record, dict):
            raise InputError(_CHANGED, self.path, line)
        return record

    def _turns(
        self,
        record: dict[str, Any],
        line: int,
        first: str,
        expected: Iterator[str],
        wanted: set[str] | None,
    ) -> Iterator[tuple[int, str, str, tuple[str, ...]]]:
        """The kept responses of a validated conversation line (``first``: its turn 1's
        id, the next ones taken from ``expected``), each with the answers before it."""
        try:
            answers = _answers(record)
            question = record["question_id"] if "question_id" in record else record["id"]
        except (KeyError, TypeError, IndexError):
            raise InputError(_CHANGED, self.path, line) from None
        conversation = question if isinstance(question, str) else str(question)
        keep = self.keep
        for k, text in enumerate(answers, 1):
            want = first if k == 1 else next(expected, None)
            if want != turn_id(conversation, k) or not isinstance(text, str):
                raise InputError(_CHANGED, self.path, line)
            if (keep is None or want in keep) and (wanted is None or want in wanted):
                yield line, want, text, tuple(answers[: k - 1])

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
    turns: Mapping[str, int] = getattr(instance_ids, "turns", {})
    for line, record in read_json_lines(path):
        qid, text = record.get("question_id"), record.get("text")
        if type(text) is str and (type(qid) is str or type(qid) is int):
            # the usual line: an instance's id (checked with the instances), once
            known = canonical.get(qid if type(qid) is str else str(qid))
            if (
                known is not None
                and known not in first_line
                and not (turns and turn_of(known, turns))
            ):
                first_line[known] = line
                ids.append(known)
                lengths.append(len(text))
                continue
        if text is None and is_conversation_answer(record):
            answered = conversation_answer(record, path, line, canonical, turns)
            check_new_conversation(answered.ids[0], first_line, path, line)
            for iid, answer in zip(answered.ids, answered.answers, strict=True):
                first_line[iid] = line
                ids.append(iid)
                lengths.append(len(answer))
            if answered.unknown:
                ignored.update(answered.ids)
            continue
        qid, text = _read(record, path, line)
        check_not_turn(qid, canonical, turns, path, line)
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
