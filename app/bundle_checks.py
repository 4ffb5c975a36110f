"""The rows of a bundle checked against the ledger's invariants before anything is written
(docs/design/bundles.md, "Trust").

A bundle's checksum detects damage, not forgery: whoever edits a bundle can recompute it.
:class:`RowChecks` makes sure that a bundle can only produce ledger states the executor
could have made: every value of the type and length its column takes; statuses of
``core.errors.Status`` and failure reasons of ``core.errors.FailureReason`` (the only
reasons the workers write: each ``JudgeError`` carries one); a done judgment's score on
its judge's scale (``rubrics.grading.PROTOCOLS``: the protocol its configuration names),
a rater's row (``human/RATER``) waiting, done or flagged and citing no answer,
a verdict of ``core.types.VERDICTS`` for a pairwise comparison, ``None`` (N/A) or nothing
for a kind of work that scores nothing; no score nor reason on an open row, no score on a
failed one; counts, tokens, costs and latencies not negative; answers with a lowercase hex
``uid`` and a 64-hex ``cache_key``; a run configuration that is a JSON object naming its
judges; every image what its row says it is (``app.bundle_images``: its digest, its
media type read from its bytes, its size, its pixels within a limit); and every image,
instance, response and answer a row points at held by the bundle.

A done judgment that cites an answer must be what its judge's protocol reads in that
answer (``app.bundle_answers``): a score the answer does not give is refused.

Memory stays bounded: each row is checked alone, and only what rows point at is kept
(instance ids and the names of their own rubrics, (model, instance) pairs of responses,
and a keyed 8-byte hash per answer uid with the place of its text in a temporary file: a
million answers take about 120 MB, and no uid can be chosen to collide with another).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from flask_eval.app.bundle_answers import Answers, BadAnswer, Rereading
from flask_eval.app.bundle_images import BadImage, check_image, decoded
from flask_eval.core.errors import FailureReason, Status
from flask_eval.core.images import ImageRef
from flask_eval.core.people import check_rater_name, is_person, rater_of
from flask_eval.core.stored import StoredConfig
from flask_eval.core.text import control_problem
from flask_eval.core.types import VERDICTS
from flask_eval.rubrics import kinds
from flask_eval.rubrics.grading import DEFAULT_PROTOCOL, PROTOCOLS
from flask_eval.rubrics.kind import NO_MODEL, RESPONSE
from flask_eval.rubrics.scale import Scale
from flask_eval.storage.bundle import OPTIONAL, TABLES, column_check
from flask_eval.workers.judge import CONTEXT_FULL, CUT_OFF, FINISHED, INCOMPLETE, REFUSAL

STATUSES = frozenset(s.value for s in Status)
REASONS = frozenset(r.value for r in FailureReason)
FINISHES = frozenset({FINISHED, CUT_OFF, CONTEXT_FULL, REFUSAL, INCOMPLETE})
MODES = frozenset({"instance", "skill"})
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"[0-9a-f]+")
_NOT_NEGATIVE = frozenset(
    {
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "cost",
        "latency_ms",
        "claims",
        "asks",
        "requests",
        "difficulty",
    }
)
#: the columns the checks read: a header without one of them is refused
_READ = {
    "run": {"mode", "config"},
    "image": {"sha256", "media_type", "width", "height", "size", "data"},
    "instance": {"instance_id"},
    "instance_domain": {"instance_id"},
    "response": {"model", "instance_id"},
    "call": {"uid", "cache_key"},
    "judgment": {
        "model",
        "instance_id",
        "judge",
        "criterion",
        "status",
        "score",
        "reason",
        "call_uid",
    },
    "judge_halt": {"judge", "reason"},
}


class BadRow(ValueError):
    """What is wrong with a row (one line)."""


def _json(text: str, kind: type, what: str) -> Any:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, kind):
        raise BadRow(f"{what} is not a JSON {'object' if kind is dict else 'list'}")
    return value


class RowChecks:
    """Checks a bundle's rows one by one, in file order (:meth:`row` raises BadRow)."""

    def __init__(self, columns: Mapping[str, Any]) -> None:
        if not set(TABLES) - OPTIONAL <= set(columns) <= set(TABLES):
            raise BadRow(f"the header's tables are {sorted(columns)}, not {sorted(TABLES)}")
        self.columns: dict[str, list[str]] = {}
        self.checks: dict[str, list[Callable[[Any], str | None]]] = {}
        for name, table in TABLES.items():
            if name not in columns:  # a bundle from before the table existed
                continue
            cols = columns[name]
            if not isinstance(cols, list) or not all(isinstance(c, str) for c in cols):
                raise BadRow(f"the header's columns of {name} are not a list of names")
            unknown = [c for c in cols if c not in table.c and not (name == "call" and c == "paid")]
            if unknown or len(set(cols)) != len(cols) or not _READ[name] <= set(cols):
                raise BadRow(
                    f"the header's table {name} has unknown, repeated or missing columns: {cols}"
                )
            self.columns[name] = cols
            self.checks[name] = [column_check(table, c) for c in cols]
        self.order = list(TABLES)
        self.at = 0  # index in TABLES of the table being read
        self.kind = kinds.JUDGMENT
        self.scales: dict[str, Scale | None] = {}  # judge -> its scale (None: unknown)
        self.images: dict[str, ImageRef] = {}  # digest -> the image the bundle holds
        self.instances: set[str] = set()
        self.own_rubrics: dict[str, frozenset[str]] = {}  # instance -> its own criteria
        self.responses: set[tuple[str, str]] = set()
        self.answers = Answers()
        self.rereading: Rereading | None = None

    def close(self) -> None:
        """Drop the answers kept for re-reading (their temporary file)."""
        self.answers.close()

    def row(self, data: Any) -> str:
        """Check one parsed row line; its table."""
        if not isinstance(data, list) or not data or not isinstance(data[0], str):
            raise BadRow("not a bundle row ([table, value, ...])")
        table, values = data[0], data[1:]
        if table not in self.columns:
            raise BadRow(f"unknown table {table!r}")
        at = self.order.index(table)
        if at < self.at:
            raise BadRow(f"a {table} row after the {self.order[self.at]} rows")
        if at > 0 and not self.scales:
            raise BadRow(f"a {table} row before the run's row")
        self.at = at
        cols = self.columns[table]
        if len(values) != len(cols):
            raise BadRow(f"a {table} row has {len(values)} values, expected {len(cols)}")
        for col, check, value in zip(cols, self.checks[table], values, strict=True):
            problem = check(value)
            if problem:
                raise BadRow(f"{table}.{col} {problem}: {_show(value)}")
        row = dict(zip(cols, values, strict=True))
        for col in _NOT_NEGATIVE.intersection(row):
            if row[col] is not None and row[col] < 0:
                raise BadRow(f"{table}.{col} is negative: {row[col]}")
        getattr(self, f"_{table}")(row)
        return table

    def _run(self, row: dict[str, Any]) -> None:
        if self.scales:
            raise BadRow("a second run row: a bundle holds one run")
        if row.get("mode") not in MODES:
            raise BadRow(f"run.mode is not one of {sorted(MODES)}: {_show(row.get('mode'))}")
        config = _json(row.get("config") or "", dict, "run.config")
        self.rereading = Rereading(config)
        try:
            stored = StoredConfig.from_data(config)
        except (TypeError, ValueError, AttributeError) as exc:
            raise BadRow(f"run.config cannot be read: {_show(str(exc))}") from None
        self.kind = stored.kind
        if not kinds.known(self.kind):
            raise BadRow(f"run.config names an unknown kind of work {_show(self.kind)}")
        for entry in stored.unnamed_judges:
            raise BadRow(f"run.config names a judge that is not a name: {_show(entry)}")
        for judge in stored.every_judge():
            protocol = judge.protocol
            name = str(protocol or DEFAULT_PROTOCOL) if isinstance(protocol, str | None) else ""
            self.scales[judge.name] = PROTOCOLS[name].scale if name in PROTOCOLS else None
        if not self.scales and stored.people is None:
            raise BadRow("run.config names no judges and no people")

    def _image(self, row: dict[str, Any]) -> None:
        digest = row["sha256"]
        try:
            ref = ImageRef(digest, row["media_type"], row["width"], row["height"], row["size"])
            check_image(ref, decoded(row["data"]))
        except BadImage as exc:
            raise BadRow(f"image {_show(digest)}: {exc}") from None
        if digest in self.images:
            raise BadRow(f"a second image {digest}")
        self.images[digest] = ref

    def _instance_images(self, instance: str, text: str) -> None:
        """Each image an instance names is one the bundle holds, as the bundle holds it."""
        for entry in _json(text, list, "instance.images"):
            try:
                ref = ImageRef.from_data(entry)
            except (TypeError, ValueError, KeyError):
                raise BadRow(
                    f"instance.images holds an entry that is no image: {_show(entry)}"
                ) from None
            held = self.images.get(ref.sha256)
            if held is None:
                raise BadRow(
                    f"instance {_show(instance)} names image {_show(ref.sha256)}, which the "
                    "bundle does not hold"
                )
            if held != ref:
                raise BadRow(
                    f"instance {_show(instance)} names image {ref.sha256} as "
                    f"{_show(entry)}, not as the bundle holds it"
                )

    def _instance(self, row: dict[str, Any]) -> None:
        if "images" in row:
            self._instance_images(row["instance_id"], row["images"])
        if "history" in row:
            turns = _json(row["history"], list, "instance.history")
            if not all(
                isinstance(t, dict)
                and isinstance(t.get("user"), str)
                and isinstance(t.get("reference", ""), str)
                and set(t) <= {"user", "reference"}
                for t in turns
            ):
                raise BadRow(
                    "instance.history is not a list of earlier turns ({user, reference} texts)"
                )
        if "skills" in row:
            _json(row["skills"], list, "instance.skills")
        if "rubrics" in row:
            own = _json(row["rubrics"], dict, "instance.rubrics")
            if own:
                self.own_rubrics[row["instance_id"]] = frozenset(own)
        self.instances.add(row["instance_id"])

    def _instance_domain(self, row: dict[str, Any]) -> None:
        self._known_instance("instance_domain", row["instance_id"])

    def _response(self, row: dict[str, Any]) -> None:
        self._known_instance("response", row["instance_id"])
        if "history" in row:
            answers = _json(row["history"], list, "response.history")
            if not all(isinstance(a, str) for a in answers):
                raise BadRow("response.history is not a list of earlier answers (texts)")
        self.responses.add((row["model"], row["instance_id"]))

    def _call(self, row: dict[str, Any]) -> None:
        uid = row["uid"]
        if not _HEX.fullmatch(uid):
            raise BadRow(f"call.uid is not lowercase hex: {_show(uid)}")
        key = row["cache_key"]
        if not _HEX64.fullmatch(key):
            raise BadRow(f"call.cache_key is not 64 lowercase hex digits: {_show(key)}")
        if "finish" in row and row["finish"] not in FINISHES:
            raise BadRow(f"call.finish is not one of {sorted(FINISHES)}: {_show(row['finish'])}")
        if not self.answers.add(uid, row.get("finish"), row.get("raw")):
            raise BadRow(f"a second answer with uid {uid}")

    def _judgment(self, row: dict[str, Any]) -> None:
        status, score, reason = row.get("status"), row.get("score"), row.get("reason")
        if status not in STATUSES:
            raise BadRow(f"judgment.status is not one of {sorted(STATUSES)}: {_show(status)}")
        judge = row["judge"]
        person = is_person(judge)
        if person:
            self._person_row(judge, status, reason, row.get("call_uid"))
        elif judge not in self.scales:
            raise BadRow(f"judgment of judge {_show(judge)}, which the run's config does not name")
        elif status == Status.WAITING.value or reason == FailureReason.FLAGGED.value:
            raise BadRow(
                f"judgment of judge {_show(judge)} is {status}"
                f"{'' if reason is None else ' (' + reason + ')'}: only a rater's row is"
            )
        instance, model, model_b = row["instance_id"], row["model"], row.get("model_b") or ""
        self._known_instance("judgment", instance)
        if kinds.of(self.kind).subject == RESPONSE:  # a row about a model's response
            for who in (model, model_b) if model_b else (model,):
                if (who, instance) not in self.responses:
                    raise BadRow(
                        f"judgment of the response of {_show(who)} to instance "
                        f"{_show(instance)}, which the bundle does not hold"
                    )
        elif model != NO_MODEL or model_b:  # a row about an instance alone names no model
            raise BadRow(f"judgment of a {self.kind} run names the model {_show(model or model_b)}")
        if status == Status.FAILED.value:
            if reason not in REASONS:
                raise BadRow(
                    f"judgment.reason of a failed row is not one of {sorted(REASONS)}: "
                    f"{_show(reason)}"
                )
        elif reason is not None:
            raise BadRow(f"judgment.reason {_show(reason)} on a {status} row")
        if score is not None:
            if status != Status.DONE.value:
                raise BadRow(f"judgment.score {score} on a {status} row")
            self._on_scale(judge, model_b, score)
        call_uid = row.get("call_uid")
        if call_uid is None:
            return
        if call_uid not in self.answers:
            raise BadRow(
                f"judgment points at answer {_show(call_uid)}, which the bundle does not hold"
            )
        assert self.rereading is not None  # a run row came first
        try:
            self.rereading.check(
                row, self.answers.get(call_uid), self.own_rubrics.get(instance, frozenset())
            )
        except BadAnswer as exc:
            raise BadRow(str(exc)) from None

    def _person_row(
        self, judge: str, status: str, reason: str | None, call_uid: str | None
    ) -> None:
        """A rater's row (``human/RATER``): waiting, rated or flagged, no provider's
        answer (its scale is that of a panel the stored configuration does not name)."""
        try:
            check_rater_name(rater_of(judge))
        except ValueError:
            raise BadRow(f"judgment of {_show(judge)}, which is no rater's ledger name") from None
        if status in (Status.PENDING.value, Status.RUNNING.value):
            raise BadRow(f"judgment of rater {_show(judge)} is {status}: a rater's row waits")
        if status == Status.FAILED.value and reason != FailureReason.FLAGGED.value:
            raise BadRow(
                f"judgment of rater {_show(judge)} failed for {_show(reason)}: a rater's row "
                "fails only flagged"
            )
        if call_uid is not None:
            raise BadRow(f"judgment of rater {_show(judge)} points at a judge's answer")

    def _on_scale(self, judge: str, model_b: str, score: int) -> None:
        if not kinds.of(self.kind).scores:
            raise BadRow(f"judgment.score {score} in a {self.kind} run, which scores nothing")
        if model_b:
            if score not in VERDICTS:
                raise BadRow(
                    f"judgment.score {score} of a pairwise comparison is not a "
                    f"verdict {list(VERDICTS)}"
                )
            return
        scale = self.scales.get(judge)  # a rater's: unknown here
        if scale is not None and score not in scale:
            raise BadRow(f"judgment.score {score} is off judge {judge}'s scale {scale.text}")

    def _judge_halt(self, row: dict[str, Any]) -> None:
        if row["judge"] not in self.scales:
            raise BadRow(
                f"judge_halt of judge {_show(row['judge'])}, which the run's config does not name"
            )
        if row.get("reason") not in REASONS:
            raise BadRow(
                f"judge_halt.reason is not one of {sorted(REASONS)}: {_show(row.get('reason'))}"
            )

    def _known_instance(self, table: str, instance: str) -> None:
        if instance not in self.instances:
            raise BadRow(
                f"{table} row of instance {_show(instance)}, which the bundle does not hold"
            )

    def end(self) -> None:
        if not self.scales:
            raise BadRow("the bundle holds no run")


def _show(value: Any) -> str:
    """A value as a message shows it: JSON, at most 60 characters."""
    text = json.dumps(value, ensure_ascii=False)
    if control_problem(text) is not None:  # a lone surrogate or a control: escaped
        text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
