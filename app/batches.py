"""What deleting a run does to its provider batches: each batch the provider still works on
is canceled there (best effort), so that a deleted run does not go on paying for answers
nobody will read (docs/design/batches.md).

A provider bills the requests of a batch it answered before the cancellation took hold;
those answers are dropped with the run. A batch whose provider id was never recorded (its
creation answer was lost and no worker has found it again yet) cannot be named: it is
said, so the user can cancel it in the provider's console.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from flask_eval.core.errors import FlaskEvalError
from flask_eval.core.redact import redact
from flask_eval.core.types import JudgeConfig
from flask_eval.storage.batch_rows import BatchInfo
from flask_eval.storage.batches import BatchLedger
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from flask_eval.workers.batching import batch_api
from flask_eval.workers.judge import create_judge

#: seconds a provider has to accept a cancellation (a delete does not wait on it longer)
CANCEL_S = 30.0


def cancel_open_batches(store: Store, run: RunInfo) -> list[str]:
    """Cancel ``run``'s open batches at their providers; one line per batch said."""
    open_ = BatchLedger(store).open_batches(run.id)
    if not open_:
        return []
    judges = {j.name: j for j in run.config.judges}
    return asyncio.run(_cancel(open_, judges))


async def _cancel(batches: Sequence[BatchInfo], judges: dict[str, JudgeConfig]) -> list[str]:
    lines: list[str] = []
    for batch in batches:
        name = f"batch {batch.uid[:12]} of judge {batch.judge} ({batch.provider})"
        if batch.provider_id is None:
            lines.append(
                f"{name}: its provider id was never recorded; cancel it in the provider's "
                f"console (its tag: {batch.uid})"
            )
            continue
        config = judges.get(batch.judge)
        if config is None:
            lines.append(f"{name}: the run names no such judge; not canceled")
            continue
        try:
            judge = create_judge(config.spec)
        except FlaskEvalError as exc:  # e.g. its API key is not set here
            lines.append(f"{name}: not canceled ({redact(str(exc))})")
            continue
        try:
            await asyncio.wait_for(batch_api(judge).cancel_batch(batch.provider_id), CANCEL_S)
            lines.append(f"{name}: canceled at the provider ({batch.provider_id})")
        except (FlaskEvalError, TimeoutError) as exc:
            why = redact(str(exc)) or f"no answer within {CANCEL_S:g} s"
            lines.append(f"{name}: not canceled ({why}); its answers are dropped")
        finally:
            await judge.aclose()
    return lines


def duplicate_note(judge: str, answers: int) -> str:
    """What ``status`` and the report say of a judge whose provider returned ``answers``
    answers beyond one per batch request (``storage.batches.BatchLedger.duplicates``)."""
    return (
        f"judge {judge}: its provider returned {answers} duplicate batch answers (a "
        "request answered more than once); the first answer of each request was read, "
        "the others are stored as paid calls, counted in the cost, and not read"
    )


def duplicate_notes(store: Store, run_id: int) -> list[str]:
    """:func:`duplicate_note` of each judge of the run that got duplicates."""
    found = BatchLedger(store).duplicates(run_id)
    return [duplicate_note(judge, n) for judge, n in sorted(found.items())]
