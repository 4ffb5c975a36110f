"""What `run`, `resume` and `wait` say once a run ends, beside the report's summary: the
cause of each kind of failure in one line, advice when a local server timed out, and how
many calls the answer cache answered; what `demo` says of its calls and coverage.
"""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Mapping, Sequence
from textwrap import shorten
from urllib.parse import urlsplit

from flask_eval.core.errors import FailureReason
from flask_eval.core.redact import redact
from flask_eval.core.types import JudgeConfig, JudgeSpec
from flask_eval.storage import queries
from flask_eval.storage.queries import FailureCause
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

#: failure lines shown at most (the rest: `flask-eval export`)
MAX_CAUSES = 8
#: characters of a failure's detail shown
DETAIL_CHARS = 160
#: the judge timeout suggested for a slow local server, in seconds
LOCAL_TIMEOUT = 600


def is_local(base_url: str | None) -> bool:
    """Whether ``base_url`` points at this machine or a private network (a local model
    server, typically with few slots), not at a provider's API."""
    if not base_url:
        return False
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def failure_lines(causes: Sequence[FailureCause], shown_halts: Sequence[str] = ()) -> list[str]:
    """One line per judge and failure reason with one of its details: ``auth 30`` says
    what failed, this says why. Reasons whose cause is already said (the judges of
    ``shown_halts``, halted with their own line) keep only their count."""
    lines = []
    for cause in causes[:MAX_CAUSES]:
        said = cause.reason == FailureReason.HALTED.value and cause.judge in shown_halts
        shown = shorten(redact(cause.detail), DETAIL_CHARS, placeholder=" ...")
        detail = "" if said or not shown else f": {shown}"
        if cause.reason == FailureReason.HALTED.value and not detail:
            detail = " (the judge was halted: see above)"
        lines.append(f"  {cause.reason} {cause.count} ({cause.judge}){detail}")
    if len(causes) > MAX_CAUSES:
        lines.append(f"  ... and {len(causes) - MAX_CAUSES} more kinds of failure")
    return lines


def local_timeout_advice(
    causes: Sequence[FailureCause],
    judges: Sequence[JudgeConfig],
    run: str,
    timeout: float,
) -> list[str]:
    """Advice for each local judge most of whose failures are timeouts: a local server
    with one slot serves one call at a time, so the default concurrency makes every call
    wait behind the others until it times out."""
    lines = []
    for judge in judges:
        mine = [c for c in causes if c.judge == judge.name]
        timeouts = sum(c.count for c in mine if c.reason == FailureReason.TIMEOUT.value)
        base_url = JudgeSpec.parse(judge.spec).base_url
        if timeouts * 2 <= sum(c.count for c in mine) or not is_local(base_url):
            continue
        lines.append(
            f"judge {judge.name}: {timeouts} judgments timed out against the local server "
            f"{base_url} (timeout {timeout:g} s). A local server answers one call (or a few) "
            f"at a time: give the judge `max_in_flight: 1` in a judges file and a longer "
            f"timeout (FLASK_EVAL_JUDGE_TIMEOUT={LOCAL_TIMEOUT}, for the workers too), then "
            f"`flask-eval resume {shlex.quote(run)} --judges FILE --reason timeout`"
        )
    return lines


def ending_lines(store: Store, run: RunInfo, timeout: float, halted: Sequence[str]) -> list[str]:
    """Everything :mod:`app.summary` adds to a run's ending."""
    lines = []
    cached = queries.cache_answered(store, run.id)
    if cached:
        lines.append(
            f"{cached:,} judge calls answered from the answer cache (paid before, free now); "
            f"see `flask-eval status {shlex.quote(run.name)}` for the calls paid"
        )
    causes = queries.failure_causes(store, run.id)
    if causes:
        lines.append("Failure causes (one detail each; all in `flask-eval export`):")
        lines += failure_lines(causes, halted)
    lines += local_timeout_advice(causes, list(run.config.judges), run.name, timeout)
    return lines


def call_count_lines(planned: int, dispatched: int, paid: int, requests: int) -> list[str]:
    """The call counts of a run told apart, in words: the calls planned (one per response
    and judge), those dispatched this time, the answers paid (the ledger's calls: a format
    reminder is a second paid answer) and the requests the judges' server saw this time
    (an answer of a server error is sent again, and not paid)."""
    lines = [
        f"Calls: {planned} planned, one per response and judge, each scoring the "
        f"response on all its skills; {dispatched} dispatched this time"
        + (
            "."
            if dispatched >= planned
            else " (all answered before: the ledger has them)."
            if dispatched == 0
            else f" (the other {planned - dispatched} were answered before)."
        )
    ]
    more = paid - planned
    if more > 0:
        why = (
            f"the {planned} calls plus {more} format reminders (a judge whose answer "
            "could not be read is asked once more, and that answer is paid too)"
        )
    elif more < 0:
        why = f"{-more} of the {planned} calls have no paid answer yet"
    else:
        why = "one per call"
    lines.append(f"Paid: {paid} answers in the ledger: {why}.")
    if requests >= paid and requests:
        extra = requests - paid
        lines.append(
            f"Requests: the judges' server saw {requests} this time: the {paid} paid answers"
            + (
                f" plus {extra} sent again after a server error (an error is not paid)."
                if extra
                else "."
            )
        )
    else:
        lines.append(
            f"Requests: the judges' server saw {requests} this time (the "
            f"{'other ' if requests else ''}answers were paid before and are read "
            "from the ledger)."
        )
    return lines


def coverage_line(coverage: Mapping[str, tuple[int, int]], judgments: Mapping[str, int]) -> str:
    """Which instances each model answered and the judgments that makes (its instances x
    their skills x the judges): a model is scored on what it answered only."""
    parts = [
        f"{m} {a} of {t} instances, {judgments.get(m, 0)} judgments"
        for m, (a, t) in coverage.items()
    ]
    return (
        "Coverage (a model is scored on the instances it answered; judgments = its "
        "instances x their skills x the judges): " + "; ".join(parts) + "."
    )
