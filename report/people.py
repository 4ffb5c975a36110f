"""People beside judges: the People section of a report (pure: rows in, numbers out).

Input: a run's finished judgments as :class:`~report.people_data.ScoreRow` (judge, model,
model_b, instance, criterion, score; N/A is None). People are the judges named
``human/RATER`` (:func:`core.people.is_person`); every other judge is a machine judge
whose samples (``run --samples``: ``judge#k``) are merged into the judge by ``judge_of``.
Only the items people rated are looked at; the time a rater spent is no input, so two
ledgers holding the same ratings give the same section.

Absolute grading (:mod:`report.people_absolute`):

- **means** of the people's scores overall, per skill (criterion), per ability and per
  model: an item's people score is the mean of its raters' scores (N/A left out), and a
  group's mean is the mean over its items;
- **agreement among people**: Krippendorff's alpha, ordinal and interval, overall and per
  criterion; units are the items, coders the raters, missing ratings allowed; only items
  at least two raters scored count (their number is given);
- **each judge against the people**, overall and per skill, ability and model: Pearson's
  r, Spearman's rho and Kendall's tau-b between the judge's score (the mean of its
  samples) and the people's mean on the items both scored (as the FLASK paper compares
  model and human scores), ``n``, and the share of items within 1 point;
- **disagreements**: per judge, the items where the judge is more than 1 point from the
  people's mean, the largest gaps first.

Pairwise grading (:mod:`report.people_pairwise`): the people's verdict on an item is
their majority (a verdict more raters gave than any other; an even split has none and
leaves the item out), a judge's is the majority of its samples; a judge's agreement is
the share of items where its verdict is the people's, with ties and without (items
where either says tie left out, as MT-Bench reports it); alpha among people is nominal.

**Intervals** are percentile bootstrap intervals (``replicates`` draws, ``seed``). The
judge-versus-people figures and the means resample *instances* (the report's unit:
:func:`report.bootstrap.instance_weights` over the sorted ids of the instances people
rated), so that one draw of an instance brings all its items; alpha resamples the
*items* themselves, with the same seed.
"""

from __future__ import annotations

from collections.abc import Iterable

from flask_eval.report import people_absolute, people_pairwise
from flask_eval.report.people_data import PeopleReport, ScoreRow
from flask_eval.report.people_items import PeopleSettings, split_rows

__all__ = ["PeopleSettings", "people_report"]


def people_report(
    rows: Iterable[ScoreRow], settings: PeopleSettings | None = None, pairwise: bool = False
) -> PeopleReport | None:
    """The People section of ``rows`` (module docstring), None when no person rated any
    item. ``pairwise``: the rows are verdicts of a pairwise run."""
    settings = PeopleSettings() if settings is None else settings
    people, judges = split_rows(rows, settings.judge_of)
    rated = {item: r for item, r in people.items() if any(v is not None for v in r.values())}
    if not rated:
        return None
    build = people_pairwise.build if pairwise else people_absolute.build
    report: PeopleReport = build(rated, judges, settings)
    report.bootstrap = {
        "replicates": settings.replicates,
        "seed": settings.seed,
        "confidence": settings.confidence,
        "method": "percentile",
        "unit": "instance (alpha: item)",
    }
    return report
