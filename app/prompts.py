"""The exact prompt a judgment's judge was sent (docs/design/viewer.md): rendered from the
stored inputs with the run's protocol, as ``workers.runner`` renders a call (the
conversation before the judged turn and the instruction's images included:
``workers.subject.job_subject``), and verified against the stored answer's cache key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask_eval.core.types import JudgeSpec
from flask_eval.producer.context import RunContext
from flask_eval.rubrics.grading import Criterion
from flask_eval.rubrics.messages import Message, parts_of
from flask_eval.storage import browse
from flask_eval.storage.images import run_images
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from flask_eval.workers.context import cache_key, generate_config
from flask_eval.workers.subject import job_subject


@dataclass(frozen=True)
class Prompt:
    """The messages a judge call was sent, as the executor renders them."""

    #: role and text of each message; an image shows as a line naming it (:func:`shown`)
    messages: list[dict[str, str]]
    criteria: list[str]  # the criteria of that call, in its order
    schema: dict[str, Any] | None = None
    note: str = ""
    #: the answer the judgment read was asked this very prompt (its cache key matches)
    verified: bool = False


def _groups(record: browse.JudgmentRecord, context: RunContext) -> list[list[int]]:
    """The rows one call may have judged with this judgment, likeliest first: its
    subject's rows split as its protocol splits them (a run's first call), then those read
    from the same answer (a call of a resumed run, which asks only what was left)."""
    criteria = {c: i for i, c, _ in record.subject_rows}
    protocol = context.protocol_for(str(record.row["judge"]))
    out = [
        [criteria[c] for c in part]
        for part in protocol.calls(list(criteria))
        if record.row["criterion"] in part
    ]
    read = [i for i, _ in record.call_rows]
    if read and read not in out:
        out.append(read)
    return out or [[int(record.row["id"])]]


def shown(messages: list[Message]) -> list[dict[str, str]]:
    """``messages`` as role and text, for reading: each image part (whose bytes the
    judge was sent, in its provider's format) as a line of its own naming it, e.g.
    ``[image: image/png, 640x480 px, 12,345 bytes, sha256 3f2a...]``."""
    out = []
    for m in messages:
        text = []
        for part in parts_of(m):
            image = getattr(part, "image", None)
            if image is None:
                text.append(part.text)
                continue
            ref = image.ref
            text.append(
                f"\n[image: {ref.media_type}, {ref.width}x{ref.height} px, {ref.size:,} bytes, "
                f"sha256 {ref.sha256}]\n"
            )
        out.append({"role": m["role"], "content": "".join(text)})
    return out


@dataclass(frozen=True)
class _Call:
    messages: list[Message]
    schema: dict[str, Any] | None
    criteria: list[Criterion]
    key: str  # the answer cache key of this prompt


def _render(store: Store, context: RunContext, ids: list[int]) -> _Call:
    """A call of the rows ``ids`` as ``workers.runner`` renders it: with the
    conversation before its turn and its instruction's images (the run's stored bytes)."""
    rows = browse.job_contexts(store, ids)
    first = rows[0]
    criteria = [context.criterion(r.criterion, r.rubrics) for r in rows]
    wanted = {i.sha256 for i in first.images}
    images = run_images(store, first.run_id, wanted) if wanted else {}
    missing = wanted - set(images)
    if missing:
        shown = ", ".join(d[:12] for d in sorted(missing))
        raise KeyError(f"the run's ledger holds no image {shown}")
    messages, schema = context.prompt(first.judge, job_subject(context, first, images), criteria)
    return _Call(messages, schema, criteria, _key(context, first.judge, messages, schema))


def _key(
    context: RunContext, judge: str, messages: list[Message], schema: dict[str, Any] | None
) -> str:
    config = context.judges[judge]
    return cache_key(
        JudgeSpec.parse(config.spec).name, messages, generate_config(config, 0, schema)
    )


def _reminded(store: Store, context: RunContext, judge: str, call: _Call) -> list[Message] | None:
    """The prompt of the format reminder that followed ``call``'s answer (as
    ``workers.runner`` asks it), or None when that answer is not stored or was read
    whole."""
    first = browse.answer_text(store, call.key)
    if first is None:
        return None
    protocol = context.protocol_for(judge)
    reading = protocol.read(first, call.criteria)
    missing = [c for c in call.criteria if c.name in reading.problems]
    if not missing:
        return None
    return [
        *call.messages,
        *protocol.reminder(first, missing, reading.problems, read=list(reading.scores)),
    ]


def render_prompt(store: Store, run: RunInfo, record: browse.JudgmentRecord) -> Prompt:
    """The exact prompt of the call whose answer ``record`` read: rendered from the
    stored inputs with the run's protocol, as ``workers.runner`` does
    (``RunContext.prompt``; after a format reminder, the first prompt, the judge's first
    answer and the reminder). ``verified`` when its answer cache key is the stored
    answer's."""
    context = RunContext.from_config(run.config)
    judge = str(record.row["judge"])
    stored = (record.call or {}).get("cache_key")
    rendered = [_render(store, context, ids) for ids in _groups(record, context)]
    names = [c.name for c in rendered[0].criteria]
    for call in rendered:
        if call.key == stored:
            return Prompt(
                shown(call.messages), [c.name for c in call.criteria], call.schema, verified=True
            )
    for call in rendered if stored else ():
        again = _reminded(store, context, judge, call)
        if again is not None and _key(context, judge, again, call.schema) == stored:
            return Prompt(
                shown(again),
                [c.name for c in call.criteria],
                call.schema,
                "its last messages are the judge's first answer and a format reminder",
                verified=True,
            )
    return Prompt(shown(rendered[0].messages), names, rendered[0].schema)
