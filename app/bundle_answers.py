"""The answers a bundle holds, and its judgments re-read from them (docs/design/bundles.md,
"Trust"): a done judgment that cites an answer must be what its judge's protocol reads in
that answer, as a worker would have read it (``workers.runner``: the answer whole, read by
the run's protocol for the judge, the criterion's score taken as read).

Memory stays bounded by the number of answers, not their size: an answer is kept as a
keyed 8-byte hash of its uid and the place of its text in a temporary file (one dict
entry per answer: about 120 MB a million), and read back when a judgment cites it; the
last one read is kept, as the rows of one call come together. Re-reading takes about
40 microseconds a judgment (a FLASK answer, by our protocol).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flask_eval.core.errors import Status
from flask_eval.core.stored import StoredConfig
from flask_eval.core.types import InstanceRubric
from flask_eval.producer.context import RunContext
from flask_eval.rubrics.grading import Criterion, Protocol
from flask_eval.workers.judge import CUT_OFF, FINISHED

_ANY_RUBRIC = InstanceRubric("", {})  # reading uses a criterion's name and N/A rule only


class BadAnswer(ValueError):
    """What is wrong with a row and the answer it cites (one line)."""


@dataclass(frozen=True)
class Answer:
    finish: str | None
    text: str


class Answers:
    """A bundle's answers by uid: added as their rows are read, read back by uid."""

    def __init__(self) -> None:
        self._key = os.urandom(16)
        self._at: dict[int, int] = {}  # uid's hash -> offset of its line in the file
        self._file = tempfile.TemporaryFile()  # noqa: SIM115  (closed by close())
        self._last: tuple[int, Answer] | None = None

    def _hash(self, uid: str) -> int:
        digest = hashlib.blake2b(uid.encode(), key=self._key, digest_size=8).digest()
        return int.from_bytes(digest, "big")

    def add(self, uid: str, finish: str | None, text: str | None) -> bool:
        """Keep an answer; False (nothing kept) if one with its uid is held already."""
        hashed = self._hash(uid)
        if hashed in self._at:
            return False
        self._file.seek(0, os.SEEK_END)
        self._at[hashed] = self._file.tell()
        self._file.write(json.dumps([finish, text or ""]).encode() + b"\n")
        return True

    def __contains__(self, uid: str) -> bool:
        return self._hash(uid) in self._at

    def get(self, uid: str) -> Answer:
        hashed = self._hash(uid)
        if self._last is not None and self._last[0] == hashed:
            return self._last[1]
        self._file.seek(self._at[hashed])
        finish, text = json.loads(self._file.readline())
        answer = Answer(finish, text)
        self._last = (hashed, answer)
        return answer

    def close(self) -> None:
        self._file.close()


class Rereading:
    """Re-reads the answer a done judgment cites with its judge's protocol in the run."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = config
        self._context: RunContext | None = None

    def _run(self) -> RunContext:
        if self._context is None:
            try:
                self._context = RunContext.from_config(StoredConfig.from_data(self._config))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise BadAnswer(
                    f"the run's config cannot be read to re-read the answers "
                    f"its judgments cite: {str(exc)[:80]}"
                ) from None
        return self._context

    def check(self, row: Mapping[str, Any], answer: Answer, own_rubrics: frozenset[str]) -> None:
        """BadAnswer unless the done ``row`` is what reading ``answer`` gives: its score (or
        N/A), and the value a kind of work other than judgment reads (a response, labels)."""
        if row.get("status") != Status.DONE.value:
            return
        context = self._run()
        judge, name = row["judge"], row["criterion"]
        try:
            protocol: Protocol = context.protocol_for(judge)
            criterion: Criterion = context.criterion(name, dict.fromkeys(own_rubrics, _ANY_RUBRIC))
        except KeyError as exc:
            raise BadAnswer(
                f"judgment of judge {judge} on criterion {name!r} cannot be read "
                f"as the run's config says: {str(exc)[:80]}"
            ) from None
        uid = row["call_uid"]
        whole = answer.finish in (None, FINISHED) or (
            answer.finish == CUT_OFF and protocol.keeps_cut_off
        )
        if not whole:
            raise BadAnswer(
                f"a done judgment cites answer {uid}, which is not whole (finish "
                f"{answer.finish!r}) and is never read"
            )
        try:
            reading = protocol.read(answer.text, [criterion])
        except (ValueError, KeyError, TypeError) as exc:  # a reader refusing its criteria
            raise BadAnswer(
                f"answer {uid} cannot be read by protocol {protocol.name} "
                f"for {name!r}: {str(exc)[:80]}"
            ) from None
        score = row.get("score")
        if name in reading.scores and reading.scores[name] == score:
            if "value" in row and row["value"] != reading.values.get(name):
                raise BadAnswer(
                    f"judgment.value of {name!r} is not what the answer it "
                    f"cites ({uid}) reads as judge {judge}'s protocol "
                    f"{protocol.name}"
                )
            return
        found = (
            f"reads {_score(reading.scores[name])}"
            if name in reading.scores
            else f"reads no score ({reading.problems.get(name, 'missing')})"
        )
        raise BadAnswer(
            f"judgment.score {_score(score)} of {name!r} does not follow from the "
            f"answer it cites ({uid}): judge {judge}'s protocol {protocol.name} "
            f"{found[:160]}"
        )


def _score(score: object) -> str:
    return "N/A (null)" if score is None else str(score)
