"""`report --calibrate PEOPLE`: the run's judges calibrated to people's labels
(``report.calibration``), with what the run says about how the labels were drawn.

PEOPLE is a rater (``human/NAME``), a panel of the run's people config, ``people`` (every
rater of the run) or the NAME of a ``--reference NAME=PATH`` (a reference file with a
``probability`` column: its labels are weighed by 1 / probability).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from flask_eval.app.score_tables import judge_of
from flask_eval.core.errors import InputError
from flask_eval.core.people import is_person
from flask_eval.report import references
from flask_eval.report.calibration import (
    ASSUMPTION,
    Calibration,
    CalibrationSettings,
    FloatArray,
    IntArray,
    calibrate,
    calibrate_pairs,
    people_labels,
)
from flask_eval.report.calibration_suggest import Suggestion, suggest
from flask_eval.report.scores import FAILED, NA, SCORED, ScoreTable
from flask_eval.storage import analytics
from flask_eval.storage.rating_counts import skipped_items
from flask_eval.storage.ratings import progress
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

#: PEOPLE meaning every rater of the run
EVERYONE = "people"


@dataclass(frozen=True)
class CalibrationInputs:
    """What the report already holds: the run's table with people's columns (``full``),
    the judges' table (ensembles too, same cells), the breakdown's members, references."""

    full: ScoreTable
    judged: ScoreTable
    members: Sequence[tuple[str, str, IntArray]]
    refs: Sequence[references.Reference]


def resolve(
    choice: str, run: RunInfo, raters: Iterable[str], refs: Sequence[str]
) -> tuple[list[str], bool]:
    """The columns PEOPLE names (ledger names of raters, or reference names) and whether
    they are references; InputError naming the valid choices."""
    people = run.config.people
    raters = list(dict.fromkeys([*raters, *(people.judges if people else ())]))
    panels = {p.name: list(p.judges) for p in (people.panels if people else ())}
    panels.update({k.removeprefix("human/"): v for k, v in list(panels.items())})
    if choice in refs:
        return [choice], True
    nested = [r for r in refs if r.startswith(f"{choice}/")]  # NAME/EVALUATOR of BiGGen
    if nested:
        return nested, True
    if choice == EVERYONE and raters:
        return raters, False
    if is_person(choice) and choice in raters:
        return [choice], False
    if choice in panels:
        return panels[choice], False
    shown_panels = [p.name for p in (people.panels if people else ())]
    valid = [*raters, *shown_panels, *([EVERYONE] if raters else []), *refs]
    shown = ", ".join(valid) if valid else "none (no rater rated, no --reference given)"
    raise InputError(f"--calibrate {choice}: unknown people; choose one of: {shown}")


def reference_weights(
    table: ScoreTable, refs: Sequence[references.Reference], columns: Sequence[str]
) -> tuple[FloatArray | None, int]:
    """1 / probability per cell of the chosen references' labels (None: none given), and
    how many labels lack a probability when others have one (weighed 1)."""
    row = {
        (table.models[m], table.instances[i], table.skills[s]): n
        for n, (m, i, s) in enumerate(
            zip(table.model.tolist(), table.instance.tolist(), table.skill.tolist(), strict=True)
        )
    }
    weights = np.ones(table.n_cells)
    given = missing = 0
    for ref in refs:
        if ref.name not in columns:
            continue
        for item in ref.scores:
            n = row.get((item.model, item.instance_id, item.skill))
            if n is None or item.score is None:
                continue
            if item.probability is None:
                missing += 1
            else:
                given += 1
                weights[n] = 1.0 / item.probability
    return (weights, missing) if given else (None, 0)


def sample_notes(
    store: Store, run: RunInfo, table: ScoreTable, columns: Sequence[str], raters: bool
) -> list[str]:
    """The assumption, and warnings where the run shows it does not hold."""
    notes = [ASSUMPTION]
    index = [table.judge_index(c) for c in columns]
    state = table.state[:, index]
    if raters:
        people = run.config.people
        waiting = {c: progress(store, c, run.id).open for c in columns}
        if people is not None and people.order == "disagreement" and any(waiting.values()):
            notes.append(
                "WARNING: the raters' queues were ordered by the judges' disagreement "
                f"(--human-first disagreement) and {sum(waiting.values())} item(s) are not "
                "rated yet: the labels are not a random sample of the cells and the "
                "intervals may not hold; rate every item, or label a random sample"
            )
        skipped = skipped_items(store, run.id)
        skips = sum(n for judge, n in skipped.items() if judge in columns)
        if skips:
            notes.append(
                f"WARNING: the raters skipped {skips} item(s) at least once: skipped items "
                "are not a random part of the queue, and the intervals may not hold"
            )
    flagged = int((state == FAILED).any(axis=1).sum())
    na = int(((state == NA).any(axis=1) & ~(state == SCORED).any(axis=1)).sum())
    if flagged or na:
        notes.append(
            f"WARNING: people flagged {flagged} cell(s) as cannot judge and said N/A to {na}: "
            "those cells count as unlabelled, and if they differ from the rest the "
            "intervals may not hold"
        )
    labelled, _ = people_labels(table, columns)
    unlabelled_models = [
        model for m, model in enumerate(table.models) if not labelled[table.model == m].any()
    ]
    unlabelled_skills = [
        skill for s, skill in enumerate(table.skills) if not labelled[table.skill == s].any()
    ]
    if unlabelled_models or unlabelled_skills:
        gaps = [*unlabelled_models, *unlabelled_skills][:8]
        notes.append(
            "WARNING: the labels cover only some models or skills (none for "
            f"{', '.join(gaps)}): an overall estimate extends them to cells of another kind"
        )
    return notes


def calibration_section(
    store: Store,
    run: RunInfo,
    choice: str,
    inputs: CalibrationInputs,
    settings: CalibrationSettings,
) -> Calibration:
    """The "Calibrated to PEOPLE" section of an absolute-grading run."""
    ref_names = [r.name for r in inputs.refs]
    raters = [j for j in inputs.full.judges if is_person(j)]
    columns, is_reference = resolve(choice, run, raters, ref_names)
    if not is_reference:
        columns = [c for c in columns if c in raters]
    table = labelled_table(inputs, columns, is_reference)
    judges = [j for j in inputs.judged.judges if j not in ref_names]
    judged = (table.state[:, [table.judge_index(j) for j in judges]] == SCORED).any(axis=1)
    if not columns or not (people_labels(table, columns)[0] & judged).any():
        raise InputError(
            f"run {run.name} has no labels from {choice} on cells its judges scored: "
            "nothing to calibrate to"
        )
    weights, missing = reference_weights(table, inputs.refs, columns) if is_reference else (None, 0)
    out = calibrate(table, columns, judges, inputs.members, settings, weights)
    out.people = choice
    out.notes = sample_notes(store, run, table, columns, not is_reference)
    if weights is not None:
        out.notes.append("labels weighed by 1 / their probability (the file's column)")
    if missing:
        out.notes.append(
            f"WARNING: {missing} label(s) have no probability while others have one; "
            "they are weighed as if drawn with certainty"
        )
    return out


def labelled_table(
    inputs: CalibrationInputs, columns: Sequence[str], is_reference: bool
) -> ScoreTable:
    """The judges' table with the chosen people's columns."""
    if is_reference:
        table, _ = references.attach(inputs.judged, inputs.refs)
        return table
    full = inputs.full
    index = [full.judge_index(c) for c in columns]
    return inputs.judged.with_judges(columns, full.state[:, index], full.score[:, index])


def suggestions(
    inputs: CalibrationInputs, run: RunInfo, choice: str | None, size: int, seed: int
) -> list[Suggestion]:
    """``report --suggest-labels N``: cells to label next (``report.calibration_suggest``),
    given the labels of ``choice`` so far (None: no labels yet)."""
    ref_names = [r.name for r in inputs.refs]
    raters = [j for j in inputs.full.judges if is_person(j)]
    columns: list[str] = []
    is_reference = False
    if choice is not None:
        columns, is_reference = resolve(choice, run, raters, ref_names)
    if not is_reference:
        columns = [c for c in columns if c in raters]
    table = labelled_table(inputs, columns, is_reference)
    judges = [j for j in inputs.judged.judges if j not in ref_names]
    return suggest(table, columns, judges, size, seed=seed)


def pairwise_calibration(
    store: Store, run: RunInfo, choice: str, settings: CalibrationSettings
) -> Calibration:
    """The "Calibrated to PEOPLE" section of a pairwise run: calibrated win rates."""
    done = analytics.pairwise_rows(store, run.id).done
    raters = sorted({row[4] for row in done if is_person(row[4])})
    columns = resolve(choice, run, raters, [])[0]
    if not any(row[4] in columns for row in done):
        raise InputError(f"run {run.name} has no verdicts from {choice}: nothing to calibrate to")
    out = calibrate_pairs(done, columns, lambda j: judge_of(j, run.config), settings)
    out.people = choice
    out.notes = [ASSUMPTION, *out.notes]
    return out
