"""FLASK metadata annotation: combining annotators (Borda skills, majority domains, modal
difficulty, every broken tie stated) and agreement with given labels (each statistic
against a hand count, the kappas against sklearn, FLASK's own labels)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import cohen_kappa_score

from flask_eval.core.types import DIFFICULTY_LABELS, DOMAINS
from flask_eval.report.annotation import (
    STATISTICS,
    Combined,
    Labels,
    agreement_rows,
    agreement_table,
    combine,
    compare,
    confusion_matrix,
    weighted_kappa,
)
from flask_eval.rubrics.skills import load_default

ORDER = [s.name for s in load_default()]
LEVELS = [1, 2, 3, 4, 5]
TOL = 1e-12

# -- combine: skills ------------------------------------------------------------------------


def test_borda_tie_for_the_last_place_is_broken_by_the_skill_order_and_stated() -> None:
    ballots = {
        "a": Labels(("Logical Correctness", "Readability", "Factuality")),
        "b": Labels(("Logical Correctness", "Readability", "Completeness")),
    }
    # points: Logical Correctness 3+3 = 6, Readability 2+2 = 4, Factuality 1, Completeness
    # 1; no first place for either of the last two, and Factuality comes first in FLASK
    combined = combine(ballots, ORDER)
    assert combined.labels.skills == ("Logical Correctness", "Readability", "Factuality")
    assert combined.ties == (
        "skills: 'Factuality' and 'Completeness' tied for place 3 (1 point each); "
        "kept 'Factuality' by the skill order",
    )
    reversed_order = combine(ballots, ORDER[::-1])
    assert reversed_order.labels.skills[2] == "Completeness"
    assert "kept 'Completeness' by the skill order" in reversed_order.ties[0]


def test_borda_tie_broken_by_first_places_before_the_skill_order() -> None:
    ballots = {
        "a": Labels(("Readability", "Logical Robustness", "Factuality")),
        "b": Labels(("Readability", "Completeness", "Logical Robustness")),
        "c": Labels(("Logical Robustness", "Completeness", "Factuality")),
    }
    # Readability 3+3 = 6 (2 first places), Logical Robustness 2+1+3 = 6 (1 first place),
    # Completeness 2+2 = 4, Factuality 1+1 = 2: Readability first although the skill
    # order puts Logical Robustness first
    combined = combine(ballots, ORDER)
    assert combined.labels.skills == ("Readability", "Logical Robustness", "Completeness")
    assert combined.ties == (
        "skills: 'Readability' and 'Logical Robustness' tied for places 1-2 (6 points each); "
        "ordered them 'Readability', 'Logical Robustness' by first places "
        "('Readability' 2, 'Logical Robustness' 1)",
    )


def test_borda_prefers_a_skill_everyone_ranks_second_to_a_single_first_place() -> None:
    ballots = {
        "a": Labels(("Factuality", "Readability", "Conciseness")),
        "b": Labels(("Completeness", "Readability", "Harmlessness")),
        "c": Labels(("Metacognition", "Readability", "Insightfulness")),
        "d": Labels(),  # gave no skills: no vote
    }
    # Readability 2+2+2 = 6; Factuality, Completeness, Metacognition 3 each with one first
    # place: places 2-3 by the skill order, Metacognition out
    combined = combine(ballots, ORDER)
    assert combined.labels.skills == ("Readability", "Factuality", "Completeness")
    assert combined.ties == (
        "skills: 'Factuality', 'Completeness' and 'Metacognition' tied for places 2-3 "
        "(3 points each); kept 'Factuality' and 'Completeness', in this order, "
        "by the skill order",
    )


def test_no_tie_stated_when_points_decide() -> None:
    ballots = {
        "a": Labels(("Factuality", "Completeness", "Readability")),
        "b": Labels(("Completeness", "Factuality", "Comprehension")),
        "c": Labels(("Factuality", "Readability", "Comprehension")),
    }
    # Factuality 3+2+3 = 8, Completeness 2+3 = 5, Readability 1+2 = 3, Comprehension 1+1 = 2
    combined = combine(ballots, ORDER)
    assert combined.labels.skills == ("Factuality", "Completeness", "Readability")
    assert combined.ties == ()


# -- combine: domains -----------------------------------------------------------------------


def test_majority_domains_most_votes_first() -> None:
    ballots = {
        "a": Labels(domains=("Math", "Coding")),
        "b": Labels(domains=("Coding",)),
        "c": Labels(domains=("Coding", "Math")),
        "d": Labels(domains=("History",)),
        "e": Labels(),  # gave no domains: 4 voters, a majority is 3
    }
    # Coding 3 of 4, Math 2 of 4 (not more than half), History 1
    combined = combine(ballots, ORDER)
    assert combined.labels.domains == ("Coding",)
    assert combined.ties == ()
    two = combine(
        {
            "a": Labels(domains=("Coding", "Math")),
            "b": Labels(domains=("Math",)),
            "c": Labels(domains=("Math", "Coding")),
        },
        ORDER,
    )
    assert two.labels.domains == ("Math", "Coding")  # Math 3 of 3 before Coding 2 of 3
    assert two.ties == ()


def test_more_majority_domains_than_allowed_are_cut_by_the_domain_order() -> None:
    ballots = {
        "a": Labels(domains=("Math", "Coding")),
        "b": Labels(domains=("Coding", "History")),
        "c": Labels(domains=("History", "Math")),
    }
    # each 2 of 3; DOMAINS order: History (4), Math (6), Coding (9)
    combined = combine(ballots, ORDER)
    assert combined.labels.domains == ("History", "Math")
    assert combined.ties == (
        "domains: 'History', 'Math' and 'Coding' each named by 2 of 3 annotators, more than "
        "2 domains with a majority; kept 'History' and 'Math' by the domain order",
    )


def test_no_majority_keeps_the_most_voted_domain() -> None:
    single = combine(
        {
            "a": Labels(domains=("Math",)),
            "b": Labels(domains=("Coding",)),
            "c": Labels(domains=("Math", "History")),
            "d": Labels(domains=("Culture",)),
        },
        ORDER,
    )
    assert single.labels.domains == ("Math",)  # 2 of 4 is no majority, but the most
    assert single.ties == ()
    three = combine(
        {
            "a": Labels(domains=("Math",)),
            "b": Labels(domains=("Coding",)),
            "c": Labels(domains=("History",)),
        },
        ORDER,
    )
    assert three.labels.domains == ("History", "Math")
    assert three.ties == (
        "domains: no domain named by a majority of 3 annotators; 'History', 'Math' and "
        "'Coding' tied with 1 vote each; kept 'History' and 'Math' by the domain order",
    )
    two = combine({"a": Labels(domains=("Coding",)), "b": Labels(domains=("Math",))}, ORDER)
    assert two.labels.domains == ("Math", "Coding")
    assert two.ties == (
        "domains: no domain named by a majority of 2 annotators; 'Math' and 'Coding' tied "
        "with 1 vote each; kept them all",
    )
    assert combine(
        {"a": Labels(domains=("Coding",)), "b": Labels(domains=("Math",))}, ORDER, max_domains=1
    ).labels.domains == ("Math",)


# -- combine: difficulty, one annotator, nothing ----------------------------------------------


@pytest.mark.parametrize(
    ("levels", "expected", "tie"),
    [
        ([4, 4, 1], 4, None),  # the mode
        (
            [2, 2, 4, 4],
            2,
            "levels 2 and 4 tied with 2 votes each (of 4); took the lower "
            "median of all the levels given (2, 2, 4, 4): 2",
        ),
        ([1, 3, 5], 3, "levels 1, 3 and 5 tied with 1 vote each (of 3)"),
        ([5, 5, 2, 2, 3], 3, "lower median of all the levels given (2, 2, 3, 5, 5): 3"),
        ([5, 1], 1, "levels 1 and 5 tied"),
    ],
)
def test_difficulty_mode_else_lower_median(
    levels: list[int], expected: int, tie: str | None
) -> None:
    ballots = {f"j{i}": Labels(difficulty=level) for i, level in enumerate(levels)}
    ballots["silent"] = Labels()  # gave no level: no vote
    combined = combine(ballots, ORDER)
    assert combined.labels.difficulty == expected
    if tie is None:
        assert combined.ties == ()
    else:
        (note,) = combined.ties
        assert note.startswith("difficulty: ") and tie in note


def test_one_annotator_passes_through_and_none_gives_nothing() -> None:
    labels = Labels(("Readability", "Factuality", "Completeness"), ("Coding", "Math"), 5)
    # as given: the rules would put Math before Coding (DOMAINS' order)
    assert combine({"only": labels}, ORDER) == Combined(labels, ())
    assert combine({}, ORDER).labels == Labels()
    with pytest.raises(ValueError, match="top"):
        combine({}, ORDER, top=0)


@pytest.mark.parametrize("level", [0, 6, True, -1])
def test_labels_refuse_a_level_outside_1_to_5(level: int) -> None:
    with pytest.raises(ValueError, match="difficulty"):
        Labels(difficulty=level)


# -- compare: hand counts -------------------------------------------------------------------

GOLD = {
    "i1": Labels(("A", "B", "C"), ("Math",), 1),
    "i2": Labels(("A", "B", "C"), ("Math", "Coding"), 2),
    "i3": Labels(("A", "B", "C"), ("History",), 3),
    "i4": Labels(("A", "B", "C"), ("Culture", "Language"), 4),
    "i5": Labels(),  # FLASK's -1 everywhere: left out of every facet, counted
    "i7": Labels(),
    "i6": Labels(("A", "B", "C"), ("Math",), 2),  # nothing predicted: left out, counted
    "gold-only": Labels(("A", "B", "C"), ("Math",), 2),
}
PREDICTED = {
    "i1": Labels(("A", "B", "C"), ("Math",), 1),
    "i2": Labels(("B", "A", "C"), ("Math",), 3),
    "i3": Labels(("A", "D", "B"), ("Math", "History"), 3),
    "i4": Labels(("D", "E", "F"), ("Math",), 1),
    "i5": Labels(("A", "B", "C"), ("Math",), 5),
    "i6": Labels(),
    "i7": Labels(("A", "B", "C"), ("Math",), 2),
    "predicted-only": Labels(("A", "B", "C"), ("Math",), 2),
}


def test_compare_against_a_hand_count() -> None:
    a = compare(PREDICTED, GOLD)
    assert (a.instances, a.predicted_only, a.gold_only) == (7, 1, 1)
    for facet in a.facets:  # i1-i4 measured, i5 and i7 no gold, i6 no prediction
        assert (facet.n, facet.gold_unknown, facet.predicted_unknown) == (4, 2, 1)
    s = a.skills.values
    # exact: i1 only -> 1/4; same set: i1, i2 -> 2/4
    # overlap |P&G|/|G|: i1 3/3, i2 3/3, i3 {A, B} 2/3, i4 0/3 -> 8/12
    # top-1: i1 A=A, i3 A=A -> 2/4
    assert s == pytest.approx({"exact": 1 / 4, "set": 2 / 4, "overlap": 8 / 12, "top1": 2 / 4})
    # domains exact: i1 -> 1/4; any overlap: i1, i2, i3 -> 3/4
    # Jaccard: i1 1/1, i2 1/2, i3 1/2, i4 0/3 -> 2/4
    assert a.domains.values == pytest.approx({"exact": 1 / 4, "any": 3 / 4, "jaccard": 2 / 4})
    # difficulty (gold, predicted): (1, 1), (2, 3), (3, 3), (4, 1)
    # exact 2/4; within 1: |0|, |1|, |0|, |3| -> 3/4
    # gold margins 1, 1, 1, 1, 0; predicted 2, 0, 2, 0, 0; n = 4
    # unweighted: p_o = 2/4, p_e = (1*2 + 1*2)/16 = 1/4 -> (1/2 - 1/4) / (3/4) = 1/3
    # linear: observed (0 + 1 + 0 + 3)/4 = 1; expected sum_g,p g_m p_m |g-p| / 16:
    #   g=1: 2*0 + 2*2 = 4, g=2: 2*1 + 2*1 = 4, g=3: 2*2 + 2*0 = 4, g=4: 2*3 + 2*1 = 8
    #   -> 20/16 = 5/4; kappa 1 - 1/(5/4) = 1/5
    # quadratic: observed (0 + 1 + 0 + 9)/4 = 5/2; expected g=1: 8, g=2: 4, g=3: 8,
    #   g=4: 2*9 + 2*1 = 20 -> 40/16 = 5/2; kappa 1 - 1 = 0
    assert a.difficulty.values == pytest.approx(
        {
            "exact": 2 / 4,
            "within1": 3 / 4,
            "kappa": 1 / 3,
            "kappa_linear": 1 / 5,
            "kappa_quadratic": 0.0,
        },
        abs=TOL,
    )
    assert a.confusion == (
        (1, 0, 0, 0, 0),
        (0, 0, 1, 0, 0),
        (0, 0, 1, 0, 0),
        (1, 0, 0, 0, 0),
        (0, 0, 0, 0, 0),
    )


def test_rows_and_table_say_each_statistic_its_value_and_its_count() -> None:
    a = compare(PREDICTED, GOLD)
    rows = agreement_rows(a)
    assert [(r["facet"], r["statistic"]) for r in rows] == [
        (facet, name) for facet, stats in STATISTICS.items() for name, _ in stats
    ]
    by = {(r["facet"], r["statistic"]): r for r in rows}
    assert by[("skills", "overlap")] == {
        "facet": "skills",
        "statistic": "overlap",
        "value": pytest.approx(8 / 12),
        "n": 4,
        "gold_unknown": 2,
        "predicted_unknown": 1,
    }
    lines = agreement_table(a).splitlines()
    assert lines[0] == (
        "Annotation agreement with the given labels: 7 instances in both "
        "(1 only annotated, 1 only given)"
    )
    cells = {
        line.strip().rsplit(None, 4)[0]: line.split()[-4:]
        for line in lines
        if line.startswith("    ")
    }
    assert cells["mean overlap |P&G|/|G|"] == ["0.667", "4", "2", "1"]
    assert cells["exact match (same order)"] == ["0.250", "4", "2", "1"]
    assert cells["kappa, linear weights"] == ["0.200", "4", "2", "1"]
    assert cells["kappa, quadratic weights"] == ["0.000", "4", "2", "1"]
    given = lines.index("Difficulty confusion (rows: given level, columns: annotated level)")
    assert lines[given + 1].split() == ["1", "2", "3", "4", "5"]
    assert lines[given + 3].split() == ["given", "2", "0", "0", "1", "0", "0"]


def test_no_common_instance_gives_undefined_statistics() -> None:
    a = compare({"x": Labels(("A",), ("Math",), 1)}, {"y": Labels(("A",), ("Math",), 1)})
    assert (a.instances, a.predicted_only, a.gold_only) == (0, 1, 1)
    assert all(v is None for f in a.facets for v in f.values.values())
    assert all(f.n == 0 for f in a.facets)
    assert "Difficulty confusion" not in agreement_table(a)


# -- kappa against sklearn ------------------------------------------------------------------


def _sklearn(gold: list[int], pred: list[int], weights: str | None) -> float:
    return float(cohen_kappa_score(gold, pred, labels=LEVELS, weights=weights))


def _random_pairs(seed: int, n: int = 200) -> tuple[list[int], list[int]]:
    """Gold levels, and predictions that agree with them more often than chance."""
    rng = np.random.default_rng(seed)
    gold = rng.integers(1, 6, size=n)
    noisy = np.clip(gold + rng.integers(-2, 3, size=n), 1, 5)
    pred = np.where(rng.random(n) < 0.5, gold, noisy)
    return [int(x) for x in gold], [int(x) for x in pred]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_matches_sklearn_on_random_pairs(seed: int, weights: str | None) -> None:
    gold, pred = _random_pairs(seed)
    table = confusion_matrix(list(zip(gold, pred, strict=True)))
    assert weighted_kappa(table, weights) == pytest.approx(_sklearn(gold, pred, weights), abs=TOL)
    a = compare(
        {str(i): Labels(difficulty=p) for i, p in enumerate(pred)},
        {str(i): Labels(difficulty=g) for i, g in enumerate(gold)},
    )
    name = {None: "kappa", "linear": "kappa_linear", "quadratic": "kappa_quadratic"}[weights]
    assert a.difficulty.values[name] == pytest.approx(_sklearn(gold, pred, weights), abs=TOL)
    assert a.difficulty.n == 200


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
def test_weighted_kappa_uses_the_fixed_levels_1_to_5(weights: str) -> None:
    """With only levels 1, 2 and 5 used, 5 is 3 steps from 2, not 1 (as it would be if
    the categories were the levels seen)."""
    gold, pred = [1, 2, 5, 5, 2, 1, 5], [2, 2, 5, 2, 1, 1, 1]
    mine = weighted_kappa(confusion_matrix(list(zip(gold, pred, strict=True))), weights)
    assert mine == pytest.approx(_sklearn(gold, pred, weights), abs=TOL)
    seen_only = float(cohen_kappa_score(gold, pred, weights=weights))
    assert abs(mine - seen_only) > 0.01


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_degenerate_kappa_is_undefined_as_in_sklearn(weights: str | None) -> None:
    same = [3] * 6  # one level on both sides: no expected disagreement
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        theirs = _sklearn(same, same, weights)
    assert np.isnan(theirs)
    assert np.isnan(weighted_kappa(confusion_matrix(list(zip(same, same, strict=True))), weights))
    assert np.isnan(weighted_kappa(np.zeros((5, 5)), weights))  # no pairs at all
    a = compare(
        {str(i): Labels(difficulty=3) for i in range(6)},
        {str(i): Labels(difficulty=3) for i in range(6)},
    )
    assert a.difficulty.values["kappa"] is None and a.difficulty.values["exact"] == 1.0
    assert "    Cohen's kappa" in agreement_table(a)
    line = next(x for x in agreement_table(a).splitlines() if "Cohen's kappa" in x)
    assert line.split()[-4:] == ["-", "6", "0", "0"]
    # one side constant, the other not: defined, 0 (agreement is exactly chance)
    gold, pred = [3] * 5, [1, 2, 3, 4, 5]
    table = confusion_matrix(list(zip(gold, pred, strict=True)))
    assert weighted_kappa(table, weights) == pytest.approx(_sklearn(gold, pred, weights), abs=TOL)
    assert weighted_kappa(table, weights) == pytest.approx(0.0, abs=TOL)


# -- FLASK's own labels ---------------------------------------------------------------------


def _flask_labels(path: Path) -> dict[str, Labels]:
    """FLASK's evaluation set as Labels: difficulty names to levels 1-5, ``-1`` unknown."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        domains = tuple(d for d in r["domain"] if d in DOMAINS)
        level = r["difficulty"]
        difficulty = DIFFICULTY_LABELS.index(level) + 1 if level in DIFFICULTY_LABELS else None
        out[str(r["idx"])] = Labels(tuple(r["skill"]), domains, difficulty)
    return out


def test_flask_labels_against_themselves_and_shifted(flask_data: Path) -> None:
    gold = _flask_labels(flask_data / "evaluation_set" / "flask_evaluation.jsonl")
    unknown_level = sum(g.difficulty is None for g in gold.values())
    unknown_domain = sum(not g.domains for g in gold.values())
    assert unknown_level > 0 and unknown_domain > 0  # the file's -1 entries

    same = compare(gold, gold)
    assert same.instances == len(gold)
    assert same.difficulty.gold_unknown == unknown_level
    assert same.domains.gold_unknown == unknown_domain
    assert same.difficulty.n == len(gold) - unknown_level
    assert all(v == pytest.approx(1.0) for f in same.facets for v in f.values.values())

    shifted = {
        i: Labels(g.skills, g.domains, None if g.difficulty is None else min(g.difficulty + 1, 5))
        for i, g in gold.items()
    }
    moved = compare(shifted, gold)
    values = moved.difficulty.values
    assert values["within1"] == 1.0
    fives = sum(g.difficulty == 5 for g in gold.values())  # only level 5 stays put
    assert values["exact"] == pytest.approx(fives / moved.difficulty.n)
    assert values["exact"] is not None and values["exact"] < 1.0
    diagonal = sum(moved.confusion[k][k] for k in range(5))
    assert diagonal == fives
