"""The card's reader on ledger rows: a twin paired with its original (a judge's samples
averaged, N/A and failures left out), a comparison's two orders as model a's results,
a twin's comparison named by its model, people's mean against each judge, and how each
judge worked."""

from __future__ import annotations

import pytest
from scipy import stats

from flask_eval.app.probe_card import _absolute, _people, _twins, _verdicts
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.storage.probe_rows import LedgerRow


def _row(judge: str, model: str, score: int | None, **kw: object) -> LedgerRow:
    values: dict[str, object] = {
        "judge": judge,
        "model": model,
        "model_b": "",
        "instance": "i1",
        "criterion": "c",
        "done": True,
        "score": score,
        "reason": None,
    }
    values.update(kw)
    return LedgerRow(**values)  # type: ignore[arg-type]


def test_a_twin_is_paired_with_its_original_and_samples_are_averaged() -> None:
    rows = [
        _row("j#1", "a", 3),
        _row("j#2", "a", 4),  # j's two samples: 3.5
        _row("j#1", "a~length+50", 5),
        _row("j#2", "a~length+50", 4),
        _row("j", "a~style", None),  # N/A: no pair
        _row("j", "a~order", 2, done=False, reason="timeout"),  # failed: no pair
        _row("human/ann", "a~style", 1),  # a person's rows are no judge's
    ]
    scores = _absolute(rows)
    texts = {
        ("a", "i1"): "one two three four",
        ("a~length+50", "i1"): "one two three four five six",
    }
    (twin,) = _twins(scores, texts)
    assert (twin.judge, twin.variant, twin.model, twin.original, twin.twin) == (
        "j", "length+50", "a", 3.5, 4.5
    )  # fmt: skip
    assert (twin.words_original, twin.words_twin) == (4, 6)


def test_both_orders_are_model_a_s_results_and_a_twin_comparison_names_its_model() -> None:
    rows = [
        _row("j", "a", VERDICT_FIRST, model_b="b"),  # a shown first, a won
        _row("j", "b", VERDICT_TIE, model_b="a"),  # a shown second: a tie
        _row("j", "a~style", VERDICT_SECOND, model_b="b"),  # the twin first, it lost
        _row("j", "b", VERDICT_SECOND, model_b="a~style"),  # the twin second, it won
        _row("j", "b", VERDICT_FIRST, model_b="a~inject-score", done=False),  # failed
    ]
    got = {(v.variant, v.model_a, v.model_b): (v.a_first, v.a_second) for v in _verdicts(rows)}
    assert got == {
        ("", "a", "b"): (1.0, 0.5),
        ("style", "a", "b"): (0.0, 1.0),
        ("inject-score", "a", "b"): (None, None),
    }


def test_people_s_mean_against_each_judge() -> None:
    people = {"i1": (4, 5), "i2": (2, 2), "i3": (3, 5), "i4": (1, 1)}
    judge = {"i1": 5, "i2": 2, "i3": 3, "i4": 3}
    rows = [
        _row(f"human/p{k}", "a", s, instance=i)
        for i, both in people.items()
        for k, s in enumerate(both)
    ]
    rows += [_row("j", "a", s, instance=i) for i, s in judge.items()]
    rows += [_row("human/p0", "a~style", 5, instance="i1")]  # a twin: never rated as a model
    (agreement,) = _people(_absolute(rows), ["j"])
    means = [4.5, 2.0, 4.0, 1.0]
    own = [5.0, 2.0, 3.0, 3.0]
    assert agreement.items == 4
    assert agreement.pearson == pytest.approx(stats.pearsonr(means, own)[0])
    assert agreement.spearman == pytest.approx(stats.spearmanr(means, own)[0])
    assert agreement.within_one == pytest.approx(0.75)  # all but i4 (1 against 3)
