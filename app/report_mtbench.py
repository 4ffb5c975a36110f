"""The MT-Bench section of a run's report (``report.mtbench``): for a run whose instances
are turns of conversations, its single-answer scores and pairwise tallies as FastChat's
``show_result.py`` computes them, the pairwise ones also per MT-Bench category."""

from __future__ import annotations

from flask_eval.app.score_tables import config_models
from flask_eval.core.people import is_person
from flask_eval.report.mtbench import MTBench, pairwise_section, single_scores, with_exact
from flask_eval.report.pairwise import Comparison
from flask_eval.report.scores import ScoreTable
from flask_eval.storage import analytics, turn_rows
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store


def instance_categories(store: Store, run_id: int) -> dict[str, str]:
    """Instance id -> its category (MT-Bench's category: the instance's capability), for
    the instances of the run that have one."""
    return {
        iid: x.capability for iid, x in store.instances(run_id).items() if x.capability is not None
    }


def conversation_groups(store: Store, run_id: int) -> tuple[dict[str, int], dict[str, str]]:
    """Of a run of conversations, instance id -> its turn and instance id -> its category
    (the pairwise report's breakdowns); both empty for a run of one-shot instructions."""
    turns = analytics.instance_turns(store, run_id)
    return turns, (instance_categories(store, run_id) if turns else {})


def mtbench_section(store: Store, run: RunInfo, table: ScoreTable) -> MTBench | None:
    """The MT-Bench section of ``run`` (None when no instance is a turn of a
    conversation): single scores of ``table`` (the run's judges, people apart), and for
    a pairwise run its judges' comparisons (a probe's twins left out) by turn and by
    category."""
    turn_of = analytics.instance_turns(store, run.id)
    if not turn_of:
        return None
    models = config_models(run.config)
    exact = turn_rows.exact_ratings(store, run.id)  # ratings written with a fraction
    section = MTBench(single=single_scores(with_exact(table, exact), models))
    if run.config.pairwise is not None:
        done = analytics.pairwise_rows(store, run.id).done
        records = [Comparison(*row) for row in done if not is_person(row[4])]
        pairs = pairwise_section(records, turn_of, models, instance_categories(store, run.id))
        section.pairwise, section.pairwise_categories = pairs.by_turn, pairs.by_category
        section.notes = pairs.notes
        if records and not section.pairwise:
            section.notes.append(
                "MT-Bench pairwise needs each comparison judged in both orders (a run with "
                "--swap, the default): this run has none"
            )
    return section
