"""A run's people in its ledger: their items planned beside the judges' rows.

``plan_people`` plans, for every rater of the run's panels, the items
``producer.people_plan`` deals them, as ``waiting`` rows (``storage.ratings``): planning
again (a run resumed, a rater added to its judges file) adds only what is missing."""

from __future__ import annotations

from flask_eval.app.plan import Plan
from flask_eval.core.people import People
from flask_eval.producer.people_plan import assign, people_items
from flask_eval.storage import ratings
from flask_eval.storage.planning import ledger_subjects
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

__all__ = ["plan_people"]

#: the judge name the run's subjects are listed under (one per subject)
_ANY = "_"


def plan_people(store: Store, run: RunInfo, plan: Plan, people: People) -> int:
    """Plan ``people``'s items of ``plan`` in ``run``'s ledger; the number of new items."""
    subjects = ledger_subjects(
        plan.inputs.instances,
        plan.inputs.response_sets,
        [_ANY],
        plan.pairs,
        about_instances=plan.inputs.about_instances,
    )
    items = people_items((m, mb, i, tuple(c)) for m, mb, i, _j, c in subjects)
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
        for r in assign(items, people)
    ]
    return ratings.plan_ratings(store, run.id, planned)
