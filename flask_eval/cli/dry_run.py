"""What a `--dry-run` prints: a plan's estimates, nothing written or sent (`run`,
`generate`, `annotate` and a kind's own command).

The use cases are imported where it runs (start-up: `--help` imports neither SQLAlchemy
nor Celery).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from flask_eval.app.pipeline import Plan
    from flask_eval.core.settings import Settings


def print_dry_run(plan: Plan, settings: Settings) -> None:
    """The estimates of ``plan``: nothing is written or sent; the answer cache is read
    when the database exists already."""
    from flask_eval.app.cache import existing_cache
    from flask_eval.app.people import dealt_lines
    from flask_eval.core.stored import StoredPairwise
    from flask_eval.producer.estimate_format import format_estimates
    from flask_eval.producer.pairs import describe_plan
    from flask_eval.rubrics import kinds
    from flask_eval.rubrics.kinds import JUDGMENT

    what = f"{plan.mode} mode" if plan.kind == JUDGMENT else plan.kind
    click.echo(f"dry run of {plan.name} ({what}): nothing is written or sent")
    if plan.pairwise is not None and plan.pairs is not None:
        models = [rs.model for rs in plan.inputs.response_sets]
        click.echo(describe_plan(models, StoredPairwise.from_data(plan.pairwise), plan.pairs))
    cache = existing_cache(settings)
    try:
        worker = kinds.of(plan.kind).words.worker
        click.echo(format_estimates(plan.sampled().summarize(cache), worker))
        for line in dealt_lines(plan):
            click.echo(line)
    finally:
        if cache is not None:
            cache.store.close()
