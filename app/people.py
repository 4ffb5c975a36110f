"""A run's people in its ledger: their items planned beside the judges' rows.

``plan_people`` plans, for every rater of the run's panels, the items
``producer.people_plan`` deals them, as ``waiting`` rows (``storage.ratings``): planning
again (a run resumed, a rater added to its judges file) adds only what is missing."""

from __future__ import annotations

from flask_eval.app.plan import Plan
from flask_eval.core.people import People
from flask_eval.producer.people_plan import Rating, assign, people_items
from flask_eval.storage import ratings
from flask_eval.storage.planning import ledger_subjects
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

__all__ = ["dealt", "dealt_lines", "order_queues", "people_lines", "plan_people"]

#: the judge name the run's subjects are listed under (one per subject)
_ANY = "_"


def dealt(plan: Plan, people: People) -> list[Rating]:
    """The items of ``plan`` ``people`` rate, rater by rater (``producer.people_plan``)."""
    subjects = ledger_subjects(
        plan.inputs.instances,
        plan.inputs.response_sets,
        [_ANY],
        plan.pairs,
        about_instances=plan.inputs.about_instances,
    )
    return assign(people_items((m, mb, i, tuple(c)) for m, mb, i, _j, c in subjects), people)


def dealt_lines(plan: Plan) -> list[str]:
    """What a dry run says of the plan's people: each rater's items and ratings."""
    if plan.people is None:
        return []
    counts: dict[str, list[int]] = {j: [0, 0] for j in plan.people.judges}
    for rating in dealt(plan, plan.people):
        counts[rating.judge][0] += 1
        counts[rating.judge][1] += len(rating.item.criteria)
    rows = ", ".join(f"{j}: {n:,} items ({r:,} ratings)" for j, (n, r) in counts.items())
    return [f"people (nothing is sent for them; they rate in `flask-eval rate`): {rows}"]


def plan_people(store: Store, run: RunInfo, plan: Plan, people: People) -> int:
    """Plan ``people``'s items of ``plan`` in ``run``'s ledger; the number of new items."""
    planned = [
        ratings.PlannedRating(
            r.judge,
            r.item.model,
            r.item.model_b,
            r.item.instance_id,
            r.item.criteria,
            r.rank,
            r.swapped,
        )
        for r in dealt(plan, people)
    ]
    return ratings.plan_ratings(store, run.id, planned)


def order_queues(store: Store, run: RunInfo) -> int:
    """Rank the run's people's open items by its order (``--human-first``) now that its
    judges have answered (``app.people_order``); the number of items ranked (0: the run
    has no people, or keeps its random order)."""
    from flask_eval.app.people_order import apply_order

    people = run.config.people
    if people is None or people.order == "random":
        return 0
    return apply_order(store, run, people.order)


def people_lines(run: RunInfo, rated: int, flagged: int, waiting: int) -> list[str]:
    """What a run's summary says of its people: how far they are, and how they go on."""
    people = run.config.people
    if people is None and not (rated or flagged or waiting):
        return []
    lines = [
        f"people: {rated:,} ratings done, {flagged:,} flagged, {waiting:,} waiting"
        + (f" (queues ordered by {people.order})" if people and people.order != "random" else "")
    ]
    if waiting:
        lines.append(
            "  raters sign in with `flask-eval raters add NAME --run RUN` and rate at "
            "`flask-eval rate`; their ratings join the report as they come"
        )
    return lines
