"""Bootstrap intervals: checked against naive numpy loops, reproducible, nominal coverage;
the score table from SQL (SQLite and PostgreSQL) equals the pure reference."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest
from sqlalchemy import update

from producer.schema import DOMAINS, Instance, Response, ResponseSet
from report.bootstrap import (
    instance_weights,
    mean_interval,
    paired_difference,
    percentile_interval,
    ratio_interval,
    ratio_replicates,
)
from report.intervals import cell_intervals, comparisons
from report.metrics import (
    KEY_SEP,
    Record,
    cells_from_records,
    rows_from_cells,
)
from report.scores import from_records, point_cells
from rubrics import codec
from rubrics.skills import load_default
from storage import analytics
from storage.models import JUDGMENT
from storage.store import Store

SKILLS = load_default()
ABILITY = {s.name: s.ability for s in SKILLS}
TOL = 1e-9


def random_records(
    seed: int,
    instances: int = 40,
    models: Sequence[str] = ("m1", "m2", "m3"),
    judges: Sequence[str] = ("j1", "j2"),
    skip_model_instances: float = 0.1,
) -> list[Record]:
    """Random judgments of FLASK's shape: 1-4 skills, 0-2 domains, unknown levels too."""
    rng = random.Random(seed)
    names = SKILLS.names
    records = []
    for i in range(instances):
        skills = rng.sample(names, rng.randint(1, 4))
        domains = tuple(rng.sample(DOMAINS[:5], rng.randint(0, 2)))
        level = rng.choice([None, 1, 2, 3, 4, 5])
        base = rng.uniform(1.5, 4.5)
        for m in models:
            if rng.random() < skip_model_instances:
                continue  # this model did not answer this instance
            for s in skills:
                for j in judges:
                    u = rng.random()
                    status = "failed" if u < 0.05 else "pending" if u < 0.08 else "done"
                    score = None
                    if status == "done" and rng.random() > 0.07:
                        score = min(5, max(1, round(base + rng.gauss(0, 1))))
                    records.append(Record(m, j, str(i), s, status, score, domains, level))
    return records


# -- the primitives ---------------------------------------------------------------------


def test_weights_are_index_resampling_counts_and_reproducible() -> None:
    n, b = 37, 200
    w = instance_weights(n, b, seed=5)
    assert w.shape == (n, b) and np.all(w.sum(axis=0) == n)
    draws = np.random.default_rng(5).integers(0, n, size=(b, n))
    naive = np.stack([np.bincount(d, minlength=n) for d in draws], axis=1)
    assert np.array_equal(w, naive)
    assert np.array_equal(w, instance_weights(n, b, seed=5))
    assert not np.array_equal(w, instance_weights(n, b, seed=6))


def test_percentile_interval_equals_numpy_nanpercentile() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(size=(30, 999))
    data[2, :400] = np.nan
    data[3, rng.random(999) < 0.5] = np.nan
    data[4] = np.nan
    data[5, 1:] = np.nan  # a single finite replicate
    for confidence in (0.95, 0.9, 0.5, 0.99):
        lo, hi = percentile_interval(data, confidence)
        for k, row in enumerate(data):
            if np.isnan(row).all():
                assert np.isnan(lo[k]) and np.isnan(hi[k])
                continue
            q = 50 * (1 - confidence)
            ref = np.nanpercentile(row, [q, 100 - q])
            assert abs(lo[k] - ref[0]) < TOL and abs(hi[k] - ref[1]) < TOL


def test_ratio_interval_equals_a_naive_resampling_loop() -> None:
    rng = np.random.default_rng(1)
    n, b = 50, 500
    counts = rng.integers(0, 4, size=(n, 3)).astype(float)
    totals = counts * rng.uniform(1, 5, size=(n, 3))
    weights = instance_weights(n, b, seed=9)
    reps = ratio_replicates(totals, counts, weights)
    draws = np.random.default_rng(9).integers(0, n, size=(b, n))
    for k in range(3):
        naive = np.array([totals[d, k].sum() / counts[d, k].sum() for d in draws])
        assert np.max(np.abs(reps[k] - naive)) < TOL
        lo, hi = ratio_interval(totals[:, k], counts[:, k], weights)
        ref = np.percentile(naive, [2.5, 97.5])
        assert abs(lo[0] - ref[0]) < TOL and abs(hi[0] - ref[1]) < TOL


def test_mean_interval_and_paired_difference_equal_naive_loops() -> None:
    rng = np.random.default_rng(2)
    n, b = 60, 400
    x = rng.normal(3, 1, n)
    lo, hi = mean_interval(x, replicates=b, seed=4)
    draws = np.random.default_rng(4).integers(0, n, size=(b, n))
    ref = np.percentile([x[d].mean() for d in draws], [2.5, 97.5])
    assert abs(lo - ref[0]) < TOL and abs(hi - ref[1]) < TOL

    ca, cb = rng.integers(1, 4, n).astype(float), rng.integers(1, 4, n).astype(float)
    ta, tb = ca * rng.uniform(2, 5, n), cb * rng.uniform(1, 4, n)
    result = paired_difference(ta, ca, tb, cb, instance_weights(n, b, 4))
    naive = [ta[d].sum() / ca[d].sum() - tb[d].sum() / cb[d].sum() for d in draws]
    ref = np.percentile(naive, [2.5, 97.5])
    assert result.diff is not None and result.ci_low is not None and result.ci_high is not None
    assert abs(result.diff - (ta.sum() / ca.sum() - tb.sum() / cb.sum())) < TOL
    assert abs(result.ci_low - ref[0]) < TOL and abs(result.ci_high - ref[1]) < TOL
    assert result.n_instances == n


# -- the report's cells -----------------------------------------------------------------


def _keys_of(record: Record) -> list[tuple[str, str]]:
    """The (dimension, key) cells one judgment counts toward."""
    keys = [("overall", "all"), ("skill", record.skill), ("ability", ABILITY[record.skill])]
    keys += [("domain", d) for d in dict.fromkeys(record.domains)]
    if record.difficulty is not None:
        keys += [
            ("difficulty", str(record.difficulty)),
            ("skill_difficulty", f"{record.skill}{KEY_SEP}{record.difficulty}"),
        ]
    return keys


def test_point_cells_equal_the_pure_reference() -> None:
    records = random_records(3)
    assert point_cells(from_records(records)) == cells_from_records(records)


def test_cell_intervals_equal_a_naive_per_cell_loop() -> None:
    records = random_records(4, instances=30)
    table = from_records(records)
    b = 300
    weights = instance_weights(len(table.instances), b, seed=11)
    got = cell_intervals(table, weights, ABILITY)
    # naive: per cell, per-instance sums from the records, resampled with the same draws
    position = {iid: k for k, iid in enumerate(table.instances)}
    sums: dict[tuple[str, str, str, str], np.ndarray] = {}
    for r in records:
        if r.status != "done" or r.score is None:
            continue
        for dim, key in _keys_of(r):
            arr = sums.setdefault((r.model, r.judge, dim, key), np.zeros((2, len(position))))
            arr[0, position[r.instance_id]] += r.score
            arr[1, position[r.instance_id]] += 1
    draws = np.random.default_rng(11).integers(0, len(position), size=(b, len(position)))
    assert set(got) == set(sums)
    for cell, (tot, cnt) in sums.items():
        with np.errstate(invalid="ignore", divide="ignore"):
            naive = np.array([tot[d].sum() / cnt[d].sum() for d in draws])
        ref = np.nanpercentile(naive, [2.5, 97.5])
        assert abs(got[cell][0] - ref[0]) < TOL and abs(got[cell][1] - ref[1]) < TOL, cell


def test_unit_weights_give_the_point_estimate_for_every_row() -> None:
    records = random_records(5)
    table = from_records(records)
    rows = rows_from_cells(point_cells(table), ABILITY)
    got = cell_intervals(table, np.ones((len(table.instances), 1)), ABILITY)
    for row in rows:
        key = (row.model, row.judge, row.dimension, row.key)
        if row.mean is None:
            assert key not in got
        else:
            assert got[key][0] == pytest.approx(row.mean, abs=TOL)
            assert got[key][1] == pytest.approx(row.mean, abs=TOL)


def test_intervals_are_reproducible_with_a_seed() -> None:
    table = from_records(random_records(6))
    n = len(table.instances)
    a = cell_intervals(table, instance_weights(n, 200, 1), ABILITY)
    assert a == cell_intervals(table, instance_weights(n, 200, 1), ABILITY)
    assert a != cell_intervals(table, instance_weights(n, 200, 2), ABILITY)


def test_comparisons_are_paired_differences_on_common_instances() -> None:
    records = random_records(7, skip_model_instances=0.25)
    table = from_records(records)
    weights = instance_weights(len(table.instances), 300, seed=3)
    result = comparisons(table, weights)
    assert len(result) == 3 * 2  # 3 pairs of models x 2 judges
    position = {iid: k for k, iid in enumerate(table.instances)}
    for c in result:
        answered = {
            m: {r.instance_id for r in records if r.model == m} for m in (c.model_a, c.model_b)
        }
        common = sorted(position[i] for i in answered[c.model_a] & answered[c.model_b])
        per = np.zeros((4, len(position)))
        for r in records:
            if r.judge == c.judge and r.status == "done" and r.score is not None:
                side = 0 if r.model == c.model_a else 2 if r.model == c.model_b else None
                if side is not None:
                    per[side, position[r.instance_id]] += r.score
                    per[side + 1, position[r.instance_id]] += 1
        sel = per[:, common]
        ref = paired_difference(sel[0], sel[1], sel[2], sel[3], weights[common])
        assert c.n_instances == len(common)
        assert c.diff == pytest.approx(ref.diff, abs=TOL)
        assert c.ci_low == pytest.approx(ref.ci_low, abs=TOL)
        assert c.ci_high == pytest.approx(ref.ci_high, abs=TOL)


def test_intervals_cover_the_true_mean_at_about_the_nominal_rate() -> None:
    """400 simulated datasets of 80 instances with 1-4 correlated skill scores each."""
    rng = np.random.default_rng(2024)
    p = np.array([0.1, 0.2, 0.3, 0.25, 0.15])  # per-instance quality level 1..5
    truth = 0.7 * (p @ np.arange(1, 6)) + 0.3 * 3.0  # E[score]; counts independent of it
    hits, datasets, n = 0, 400, 80
    for k in range(datasets):
        level = rng.choice(np.arange(1, 6), size=n, p=p)
        counts = rng.integers(1, 5, size=n).astype(float)
        # each skill score is the instance's level w.p. 0.7, else uniform on 1..5
        totals = np.array(
            [
                np.where(rng.random(int(c)) < 0.7, lv, rng.integers(1, 6, int(c))).sum()
                for lv, c in zip(level, counts, strict=True)
            ],
            dtype=float,
        )
        lo, hi = ratio_interval(totals, counts, instance_weights(n, 1000, seed=k))
        hits += int(lo[0] <= truth <= hi[0])
    coverage = hits / datasets
    assert 0.90 <= coverage <= 0.99, coverage


# -- from the SQL store -----------------------------------------------------------------


def _store_run(store: Store, seed: int) -> tuple[int, list[Record]]:
    """A run written through the store, its ledger finished at random."""
    rng = random.Random(seed)
    names = SKILLS.names
    instances = [
        Instance(
            id=f"q{i}",
            instruction=f"question {i}",
            answer=f"answer {i}",
            skills=tuple(rng.sample(names, rng.randint(1, 3))),
            domains=tuple(rng.sample(DOMAINS, rng.randint(0, 2))),
            difficulty=rng.choice([None, 1, 2, 3, 4, 5]),
        )
        for i in range(25)
    ]
    sets = [
        ResponseSet(m, f"{m}.jsonl", tuple(Response(m, x.id, "text") for x in instances[k:]))
        for k, m in enumerate(("alpha", "beta"))
    ]
    judges = ["openai/a", "anthropic/b", "openai/c"]
    run, _ = store.create_run(
        name="stats",
        fingerprint="s" * 64,
        mode="instance",
        config={"judges": judges[:2], "skills": codec.to_data(SKILLS)},  # c is "unknown"
        instances=instances,
        response_sets=sets,
        judges=judges,
    )
    by_id = {x.id: x for x in instances}
    records = []
    j = JUDGMENT.c
    with store.engine.begin() as conn:
        rows = conn.execute(
            j.id.table.select().with_only_columns(j.id, j.model, j.instance_id, j.skill, j.judge)
        ).all()
        for rid, model, iid, skill, judge in rows:
            u = rng.random()
            status = "failed" if u < 0.1 else "pending" if u < 0.15 else "done"
            score = rng.randint(1, 5) if status == "done" and rng.random() > 0.1 else None
            conn.execute(update(JUDGMENT).where(j.id == rid).values(status=status, score=score))
            inst = by_id[iid]
            records.append(
                Record(model, judge, iid, skill, status, score, inst.domains, inst.difficulty)
            )
    return run.id, records


@pytest.mark.parametrize("judges_per_query", [32, 2])
def test_score_table_from_sql_equals_the_reference(
    database_url: str, judges_per_query: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(analytics, "JUDGES_PER_QUERY", judges_per_query)
    store = Store(database_url)
    run_id, records = _store_run(store, seed=8)
    run = store.run_by_id(run_id)
    table = analytics.score_table(store, run_id, run.config["judges"], DOMAINS)
    assert table.judges == ("openai/a", "anthropic/b", "openai/c")  # c found and appended
    ref = from_records(records, judges=table.judges)
    assert table.models == ref.models and table.instances == ref.instances
    assert table.skills == ref.skills
    for name in ("model", "instance", "skill", "state", "difficulty"):
        assert np.array_equal(getattr(table, name), getattr(ref, name)), name
    assert np.array_equal(table.score, ref.score, equal_nan=True)
    # the report's sums derived from the table equal the pure reference's
    assert point_cells(table) == cells_from_records(records)
    store.close()
