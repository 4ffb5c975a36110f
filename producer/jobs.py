"""The inputs of a run whose kind of work is not judgment (rubrics/kinds.py): generation
(the models under test answer the instances), annotation (models label the instances
with FLASK's metadata), and every kind whose rows are about responses (``Kind.subject``).

The ledger keys a row by (model, model_b, instance, criterion, worker). A generation or
an annotation row is about an instance alone (``rubrics.kind.INSTANCE``): its model is
none (``rubrics.kind.NO_MODEL``, as ``model_b`` is for absolute grading), no response
is given or stored for it, and its worker is the model that does the work: the model
under test (generation) or the annotator. The planner, the estimates, dispatching, the
executor and the answer cache plan such rows from the instances (``Inputs.subjects``).
A kind whose rows are about a model's response (a critique) has the responses given as
its subjects, as a judgment run has. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from flask_eval.core.types import Instance, ResponseSet
from flask_eval.producer.inputs import Inputs
from flask_eval.rubrics.skills import SkillSet


def job_inputs(
    instances: Sequence[Instance],
    criteria: SkillSet,
    responses: Sequence[ResponseSet] | None = None,
) -> Inputs:
    """``instances`` as the rows of one job per instance and worker model: each instance
    gets the kind's criteria (a generation's ``response``, an annotation's facets), no
    response is given; with ``responses`` (a kind whose rows are about responses), one
    job per response and worker model instead."""
    names = criteria.names
    jobs = tuple(replace(i, skills=names, rubrics={}) for i in instances)
    if responses is not None:
        return Inputs(jobs, tuple(responses))
    return Inputs(jobs, (), about_instances=True)
