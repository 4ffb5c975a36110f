"""`flask-eval raters queue RUN --rater NAME FILE`: a labels template's cells (``report
--suggest-labels``) planned into a rater's queue in the rating workspace, in the file's
order; and the template's inclusion probabilities read back for ``report --calibrate
--label-probabilities FILE`` (the ledger keeps ratings, not the probabilities they were
drawn with)."""

from __future__ import annotations

from dataclasses import dataclass

from flask_eval.app.score_tables import run_table
from flask_eval.core.errors import InputError
from flask_eval.core.people import RaterNameError, check_rater_name, rater_judge
from flask_eval.report import references
from flask_eval.storage import ratings
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

#: (model, instance_id, skill) -> the probability its cell was drawn with
Probabilities = dict[tuple[str, str, str], float]


@dataclass(frozen=True)
class Queued:
    """What ``raters queue`` planned: items (pages) and cells of the file, items new."""

    items: int
    cells: int
    new: int


def read_probabilities(path: str) -> Probabilities:
    """The template's probabilities, each cell's; InputError (file:line) for a line
    without one."""
    ref = references.load("labels", path)
    out: Probabilities = {}
    for item in ref.scores:
        if item.probability is None:
            raise InputError(f"{path}:{item.line}: no probability for this cell")
        out[(item.model, item.instance_id, item.skill)] = item.probability
    return out


def queue_labels(store: Store, run: RunInfo, rater: str, path: str) -> Queued:
    """Plan the template's cells into ``rater``'s queue: one item per (model, instance)
    with the cells' skills as its criteria, ranked in the file's order. Every cell must be
    one of the run's (InputError naming file:line otherwise); nothing is planned then."""
    try:
        judge = rater_judge(check_rater_name(rater))
    except RaterNameError as exc:
        raise InputError(str(exc)) from None
    if run.config.pairwise is not None:
        raise InputError("raters queue: for runs grading one response at a time")
    ref = references.load("labels", path)
    table = run_table(store, run)
    cells = {
        (table.models[m], table.instances[i], table.skills[s])
        for m, i, s in zip(
            table.model.tolist(), table.instance.tolist(), table.skill.tolist(), strict=True
        )
    }
    criteria: dict[tuple[str, str], list[str]] = {}
    for item in ref.scores:
        if (item.model, item.instance_id, item.skill) not in cells:
            raise InputError(
                f"{path}:{item.line}: ({item.model}, {item.instance_id}, {item.skill}) is no "
                f"cell of run {run.name}"
            )
        criteria.setdefault((item.model, item.instance_id), []).append(item.skill)
    planned = [
        ratings.PlannedRating(judge, model, "", instance, tuple(skills), float(rank), False)
        for rank, ((model, instance), skills) in enumerate(criteria.items())
    ]
    new = ratings.plan_ratings(store, run.id, planned)
    return Queued(len(planned), len(ref.scores), new)
