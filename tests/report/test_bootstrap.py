"""Bootstrap intervals: checked against naive numpy loops, reproducible, nominal coverage;
the score table from SQL (SQLite and PostgreSQL) equals the pure reference."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest
from sqlalchemy import update

from flask_eval.app.score_tables import score_table
from flask_eval.core.types import DOMAINS, Instance, Response, ResponseSet
from flask_eval.report.bootstrap import instance_weights, percentile_interval
from flask_eval.report.breakdown import Aggregation, Breakdown, Dimension, flask_breakdown
from flask_eval.report.intervals import Intervals, cell_intervals, comparisons
from flask_eval.report.metrics import KEY_SEP, OVERALL, SKILL
from flask_eval.report.scores import SCORED, ScoreTable, build
from flask_eval.rubrics import codec
from flask_eval.rubrics.skills import load_default
from flask_eval.storage import analytics
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.store import Store
from tests.reference import Record, cells_from_records, from_records, point_cells

SKILLS = load_default()
ABILITY = {s.name: s.ability for s in SKILLS}
TOL = 1e-9


def intervals_of(
    table: ScoreTable,
    weights: np.ndarray,
    breakdown: Breakdown | None = None,
    confidence: float = 0.95,
) -> Intervals:
    """The report's intervals (FLASK's breakdown unless another is given)."""
    aggregation = Aggregation(table, breakdown or flask_breakdown(ABILITY))
    return cell_intervals(aggregation, weights, confidence)


def one_score_per_cell(values: np.ndarray, counts: np.ndarray | None = None) -> ScoreTable:
    """One model, one judge: instance i has ``counts[i]`` (default 1) scored cells whose
    scores sum to ``values[i]`` times the count, i.e. a per-instance mean of values[i]."""
    counts = np.ones(len(values), dtype=int) if counts is None else counts
    cells, scores = [], []
    for i, (value, count) in enumerate(zip(values.tolist(), counts.tolist(), strict=True)):
        for k in range(int(count)):
            cells.append(("m", f"{i:04d}", f"s{k}"))
            scores.append(value)
    state = np.full((len(cells), 1), SCORED, dtype=np.int8)
    return build(cells, ["j"], state, np.array(scores, dtype=float)[:, None])


OVERALL_ONLY = Breakdown((Dimension(OVERALL),))


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


def test_replicate_means_equal_a_naive_resampling_loop() -> None:
    """Each replicate of a micro-averaged mean is sum(totals) / sum(counts) over the
    instances drawn (with their multiplicity)."""
    rng = np.random.default_rng(1)
    n, b = 50, 500
    values = rng.uniform(1, 5, n)
    counts = rng.integers(1, 4, n)
    table = one_score_per_cell(values, counts)
    weights = instance_weights(n, b, seed=9)
    ((dimension, key, reps),) = list(Aggregation(table, OVERALL_ONLY).replicates(weights))
    assert (dimension, key) == ("overall", "all") and reps.shape == (1, b)
    totals, cnt = values * counts, counts.astype(float)
    draws = np.random.default_rng(9).integers(0, n, size=(b, n))
    naive = np.array([totals[d].sum() / cnt[d].sum() for d in draws])
    assert np.max(np.abs(reps[0] - naive)) < TOL
    lo, hi = intervals_of(table, weights, OVERALL_ONLY)[("m", "j", "overall", "all")]
    ref = np.percentile(naive, [2.5, 97.5])
    assert abs(lo - ref[0]) < TOL and abs(hi - ref[1]) < TOL


def test_an_interval_is_reproduced_from_the_ids_in_string_order() -> None:
    """The documented recipe (docs/design/statistics.md): instances numbered by their ids
    sorted as strings ("1" < "10" < "2"), replicate b drawing
    ``default_rng(seed).integers(0, n, (B, n))[b]``, gives the report's interval."""
    n, b, seed = 12, 300, 5
    ids = [str(i) for i in range(1, n + 1)]  # given in numeric order
    value = {iid: float(int(iid) % 5) for iid in ids}
    cells = [("m", iid, "s") for iid in ids]
    state = np.full((n, 1), SCORED, dtype=np.int8)
    table = build(cells, ["j"], state, np.array([[value[i]] for i in ids]))
    lo, hi = intervals_of(table, instance_weights(n, b, seed), OVERALL_ONLY)[
        ("m", "j", "overall", "all")
    ]
    numbered = sorted(ids)
    assert numbered[:4] == ["1", "10", "11", "12"]
    x = np.array([value[i] for i in numbered])
    draws = np.random.default_rng(seed).integers(0, n, size=(b, n))
    ref = np.percentile([x[d].mean() for d in draws], [2.5, 97.5])
    assert abs(lo - ref[0]) < TOL and abs(hi - ref[1]) < TOL
    numeric = np.array([value[i] for i in ids])  # numbering them numerically differs
    other = np.percentile([numeric[d].mean() for d in draws], [2.5, 97.5])
    assert abs(other[0] - ref[0]) + abs(other[1] - ref[1]) > TOL


def test_mean_interval_and_paired_difference_equal_naive_loops() -> None:
    rng = np.random.default_rng(2)
    n, b = 60, 400
    x = rng.normal(3, 1, n)
    lo, hi = intervals_of(one_score_per_cell(x), instance_weights(n, b, 4), OVERALL_ONLY)[
        ("m", "j", "overall", "all")
    ]
    draws = np.random.default_rng(4).integers(0, n, size=(b, n))
    ref = np.percentile([x[d].mean() for d in draws], [2.5, 97.5])
    assert abs(lo - ref[0]) < TOL and abs(hi - ref[1]) < TOL

    # two models on the same n instances: per-instance means ta / ca and tb / cb
    ca, cb = rng.integers(1, 4, n), rng.integers(1, 4, n)
    ma, mb = rng.uniform(2, 5, n), rng.uniform(1, 4, n)
    ta, tb = ca * ma, cb * mb
    keys, scores = [], []
    for model, table in (("A", one_score_per_cell(ma, ca)), ("B", one_score_per_cell(mb, cb))):
        for i, s, v in zip(table.instance, table.skill, table.score[:, 0], strict=True):
            keys.append((model, table.instances[i], table.skills[s]))
            scores.append(v)
    state = np.full((len(keys), 1), SCORED, dtype=np.int8)
    table = build(keys, ["j"], state, np.array(scores)[:, None])
    (result,) = comparisons(table, instance_weights(n, b, 4))
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
    got = intervals_of(table, weights)
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
    rows = Aggregation(table, flask_breakdown(ABILITY)).rows()
    got = intervals_of(table, np.ones((len(table.instances), 1)))
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
    a = intervals_of(table, instance_weights(n, 200, 1))
    assert a == intervals_of(table, instance_weights(n, 200, 1))
    assert a != intervals_of(table, instance_weights(n, 200, 2))


def test_comparisons_are_paired_differences_on_common_instances() -> None:
    records = random_records(7, skip_model_instances=0.25)
    table = from_records(records)
    weights = instance_weights(len(table.instances), 300, seed=3)
    result = comparisons(table, weights)
    assert len(result) == 3 * 2  # 3 pairs of models x 2 judges
    position = {iid: k for k, iid in enumerate(table.instances)}
    draws = np.random.default_rng(3).integers(0, len(position), size=(300, len(position)))
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
        sel = per[:, common].sum(axis=1)
        # naive: each replicate's draws of common instances, with their multiplicity
        both = np.zeros(len(position), dtype=bool)
        both[common] = True
        with np.errstate(invalid="ignore", divide="ignore"):
            naive = [
                per[0, d].sum() / per[1, d].sum() - per[2, d].sum() / per[3, d].sum()
                for d in (row[both[row]] for row in draws)
            ]
        ref = np.nanpercentile(naive, [2.5, 97.5])
        assert c.n_instances == len(common)
        assert c.diff == pytest.approx(sel[0] / sel[1] - sel[2] / sel[3], abs=TOL)
        assert c.ci_low == pytest.approx(ref[0], abs=TOL)
        assert c.ci_high == pytest.approx(ref[1], abs=TOL)


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
        scores = [
            np.where(rng.random(int(c)) < 0.7, lv, rng.integers(1, 6, int(c)))
            for lv, c in zip(level, counts, strict=True)
        ]
        cells = [("m", f"{i:02d}", f"s{j}") for i, s in enumerate(scores) for j in range(len(s))]
        state = np.full((len(cells), 1), SCORED, dtype=np.int8)
        table = build(cells, ["j"], state, np.concatenate(scores)[:, None].astype(float))
        weights = instance_weights(n, 1000, seed=k)
        lo, hi = intervals_of(table, weights, OVERALL_ONLY)[("m", "j", "overall", "all")]
        hits += int(lo <= truth <= hi)
    coverage = hits / datasets
    assert 0.90 <= coverage <= 0.99, coverage


def test_a_new_dimension_and_another_overall_rule_are_data() -> None:
    """A dimension of two attributes (one multi-valued) and an overall that is the mean of
    the skill means: points and intervals equal naive loops over the records."""
    breakdown = Breakdown(
        (
            Dimension("overall", mean_of=SKILL),
            Dimension(SKILL, by=("skill",)),
            Dimension("domain_level", by=("domain", "difficulty")),
        ),
        orders={"domain": DOMAINS},
    )
    records = random_records(9, instances=30)
    table = from_records(records)
    aggregation = Aggregation(table, breakdown)
    rows = aggregation.rows()
    position = {iid: k for k, iid in enumerate(table.instances)}
    sums: dict[tuple[str, str, str, str], np.ndarray] = {}
    counts: dict[tuple[str, str, str, str], int] = {}
    for r in records:
        if r.status not in ("done", "failed"):
            continue
        counted = [(SKILL, r.skill)]
        if r.difficulty is not None:
            counted += [("domain_level", f"{d}{KEY_SEP}{r.difficulty}") for d in r.domains]
        for dim, key in counted:
            cell = (r.model, r.judge, dim, key)
            counts[cell] = counts.get(cell, 0) + 1
            arr = sums.setdefault(cell, np.zeros((2, len(position))))
            if r.status == "done" and r.score is not None:
                arr[:, position[r.instance_id]] += (r.score, 1)
    got = {(r.model, r.judge, r.dimension, r.key): r for r in rows}
    for cell, (tot, cnt) in sums.items():
        mean = tot.sum() / cnt.sum() if cnt.sum() else None
        assert got[cell].mean == (pytest.approx(mean, abs=TOL) if mean is not None else None)
        assert got[cell].n + got[cell].n_na + got[cell].n_failed == counts[cell]
    keys = [r.key for r in rows if (r.model, r.judge, r.dimension) == ("m1", "j1", "domain_level")]
    assert keys == sorted(keys, key=lambda k: (DOMAINS.index(k.split(KEY_SEP)[0]), int(k[-1])))
    b = 200
    weights = instance_weights(len(position), b, seed=5)
    intervals = cell_intervals(aggregation, weights)
    draws = np.random.default_rng(5).integers(0, len(position), size=(b, len(position)))
    for model, judge in {(r.model, r.judge) for r in rows}:
        skills = [v for (m, j, d, _), v in sums.items() if (m, j, d) == (model, judge, SKILL)]
        point = [t.sum() / c.sum() for t, c in skills if c.sum()]
        overall = got[(model, judge, "overall", "all")]
        assert overall.mean == pytest.approx(float(np.mean(point)), abs=TOL)
        with np.errstate(invalid="ignore", divide="ignore"):
            per = np.array([[t[d].sum() / c[d].sum() for t, c in skills] for d in draws])
        naive = np.nanpercentile(np.nanmean(per, axis=1), [2.5, 97.5])
        low, high = intervals[(model, judge, "overall", "all")]
        assert abs(low - naive[0]) < TOL and abs(high - naive[1]) < TOL
    for cell, (tot, cnt) in sums.items():
        if cell[2] != "domain_level" or not cnt.sum():
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            naive = np.nanpercentile([tot[d].sum() / cnt[d].sum() for d in draws], [2.5, 97.5])
        assert abs(intervals[cell][0] - naive[0]) < TOL, cell
        assert abs(intervals[cell][1] - naive[1]) < TOL, cell


# -- from the SQL store -----------------------------------------------------------------


def _store_run(
    store: Store, seed: int, judge_config: Sequence[object] | None = None
) -> tuple[int, list[Record]]:
    """A run written through the store, its ledger finished at random; ``judge_config``
    is what its config records of the judges (default: the first two judges' names)."""
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
        # c is "unknown" to the config
        config={"judges": list(judge_config or judges[:2]), "skills": codec.to_data(SKILLS)},
        instances=instances,
        response_sets=sets,
        judges=judges,
    )
    by_id = {x.id: x for x in instances}
    records = []
    j = JUDGMENT.c
    with store.engine.begin() as conn:
        rows = conn.execute(
            j.id.table.select().with_only_columns(
                j.id, j.model, j.instance_id, j.criterion, j.judge
            )
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
    table = score_table(store, run_id, list(run.config.judge_names), DOMAINS)
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
