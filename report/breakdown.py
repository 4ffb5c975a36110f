"""The aggregation core: which cells of a score table count toward which (dimension, key).

A report's breakdowns are data. A :class:`Breakdown` lists :class:`Dimension` objects,
each naming the cell *attributes* its keys are made of (:data:`ATTRIBUTES`: a cell's
skill, its instance's difficulty level, domains, capability or task; all defined in
``report.dimensions``). :class:`Aggregation` resolves them on one
:class:`report.scores.ScoreTable` once, and that one membership gives both the point
estimates (:meth:`Aggregation.rows`) and the bootstrap replicates
(:meth:`Aggregation.replicates`, read by ``report.intervals``): the two cannot disagree
about which cells a mean covers. Means are micro-averages: ``sum(scores) / n`` over the
(instance, skill) cells of a key; N/A and failed judgments are counted, never averaged.

How the work is shared. A dimension whose keys come from single-valued attributes
(overall, skill, ability, difficulty, skill x difficulty) is a partition of the cells; the
cells that share their key in every partition form an *atom* (for FLASK: one skill at one
difficulty level). Sums, point and replicate, are computed once per atom and added into
each partition's keys, so a cell enters one product per replicate however many partitions
there are. A dimension with a multi-valued attribute (domain: an instance counts toward
each of its domains) is summed key by key.

The overall rule. ``Dimension(OVERALL)`` pools every cell (FLASK's rule). The seam for
another rule is ``Dimension(name, mean_of=OTHER)``: its single key's mean is the mean of
OTHER's key means (BiGGen Bench's "overall = mean of capability means"), on the point
estimate and on each replicate alike (keys without a mean are left out of it). A
dimension's rows may carry another dimension's name (``label``) under a key of their own
(``key``): BiGGen's overall is the row ``("overall", "biggen")`` beside FLASK's
``("overall", "all")`` (:func:`report_breakdown` with ``capabilities=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from flask_eval.report.dimensions import (
    ATTRIBUTES,
    BIGGEN_OVERALL,
    Attribute,
    Breakdown,
    Dimension,
    KeyOrders,
    flask_breakdown,
    report_breakdown,
)
from flask_eval.report.instance_sums import Replicates, per_instance
from flask_eval.report.metrics import KEY_SEP, Row
from flask_eval.report.scores import FAILED, NA, SCORED, FloatArray, IntArray, ScoreTable

__all__ = [
    "ATTRIBUTES",
    "BIGGEN_OVERALL",
    "Aggregation",
    "Attribute",
    "Breakdown",
    "Dimension",
    "Grouping",
    "KeyOrders",
    "flask_breakdown",
    "per_instance",
    "report_breakdown",
]

Progress = Callable[[int], object]


@dataclass(frozen=True)
class Grouping:
    """A dimension resolved on a table: ``keys`` in report order and who counts toward them.

    Partition: ``cells`` is None and ``code[cell]`` is the key of each cell (-1: none).
    Multi-valued: the pairs ``(cells[p], code[p])``. ``mean_of``: no cells of its own.
    """

    dimension: Dimension
    keys: tuple[str, ...]
    code: IntArray
    cells: IntArray | None = None

    @property
    def partition(self) -> bool:
        return self.cells is None and self.dimension.mean_of is None


SortKey = tuple[object, ...]


def _rank(order: Sequence[str]) -> Callable[[str], SortKey]:
    position = {key: i for i, key in enumerate(order)}
    return lambda key: (position.get(key, len(position)), key)


def _resolve(
    dim: Dimension, table: ScoreTable, attrs: dict[str, Attribute], breakdown: Breakdown
) -> Grouping:
    n = table.n_cells
    if dim.mean_of is not None:
        return Grouping(dim, (dim.key,), np.zeros(0, dtype=np.int64))
    if not dim.by:
        return Grouping(dim, (dim.key,), np.zeros(n, dtype=np.int64))
    unknown = [a for a in dim.by if a not in ATTRIBUTES]
    if unknown:
        raise ValueError(f"dimension {dim.name}: unknown attribute(s) {', '.join(unknown)}")
    parts = [attrs.setdefault(a, ATTRIBUTES[a](table)) for a in dim.by]
    multi = [p for p in parts if p.pairs is not None]
    if len(multi) > 1:
        raise ValueError(f"dimension {dim.name}: at most one multi-valued attribute")
    cells = multi[0].pairs[0] if multi and multi[0].pairs is not None else None
    combined = np.zeros(n if cells is None else len(cells), dtype=np.int64)
    valid = np.ones(len(combined), dtype=bool)
    for part in parts:
        if part.pairs is not None:
            c = part.pairs[1]
        else:
            assert part.code is not None
            c = part.code if cells is None else part.code[cells]
        combined = combined * len(part.labels) + c
        valid &= c >= 0
    present, inverse = np.unique(combined[valid], return_inverse=True)
    ranks = [_rank(breakdown.orders.get(a, ())) for a in dim.by]
    texts: list[str] = []
    sorts: list[SortKey] = []
    for value in present.tolist():
        labels: list[str] = []
        sort: SortKey = ()
        for part, rank in zip(reversed(parts), reversed(ranks), strict=True):
            value, c = divmod(value, len(part.labels))
            label = part.labels[c]
            labels.insert(0, label)
            sort = ((int(label),) if part.numeric else rank(label)) + sort
        texts.append(KEY_SEP.join(labels))
        sorts.append(sort)
    kept = [True] * len(texts)
    if dim.rename is not None:
        rename = dim.rename
        missing = sorted({t for t in texts if t not in rename})
        if missing and not dim.partial:
            raise ValueError(f"no {dim.name} known for: {', '.join(missing)}")
        rank = _rank(breakdown.orders.get(dim.name, ()))
        kept = [t in rename for t in texts]
        texts = [rename.get(t, t) for t in texts]
        sorts = [rank(t) for t in texts]
    ranked = (item for item, keep in zip(zip(texts, sorts, strict=True), kept, strict=True) if keep)
    best = dict(sorted(ranked, key=lambda item: item[1]))
    keys = tuple(best)
    index = {key: i for i, key in enumerate(keys)}
    keymap = np.array(
        [index[t] if keep else -1 for t, keep in zip(texts, kept, strict=True)], dtype=np.int64
    )
    mapped = keymap[inverse.reshape(-1)]
    if cells is not None:
        live = mapped >= 0
        return Grouping(dim, keys, mapped[live], cells[valid][live])
    code = np.full(n, -1, dtype=np.int64)
    code[valid] = mapped
    return Grouping(dim, keys, code)


def _atoms(groupings: Sequence[Grouping], n: int) -> tuple[IntArray, IntArray]:
    """(atom of each cell, ``(atoms, partitions)`` key codes of each atom), atoms sorted by
    their codes (first partition most significant)."""
    if not groupings:
        return np.zeros(n, dtype=np.int64), np.zeros((1, 0), dtype=np.int64)
    sizes = [len(g.keys) + 1 for g in groupings]
    if float(np.prod(np.array(sizes, dtype=np.float64))) < 2.0**62:
        combined = np.zeros(n, dtype=np.int64)
        for g, size in zip(groupings, sizes, strict=True):
            combined = combined * size + (g.code + 1)
        present, atom = np.unique(combined, return_inverse=True)
        codes = np.zeros((len(present), len(groupings)), dtype=np.int64)
        rest = present.copy()
        for k in range(len(groupings) - 1, -1, -1):
            rest, codes[:, k] = np.divmod(rest, sizes[k])
        return atom.reshape(-1).astype(np.int64), codes - 1
    matrix = np.stack([g.code for g in groupings], axis=1)
    codes, atom = np.unique(matrix, axis=0, return_inverse=True)
    return atom.reshape(-1).astype(np.int64), codes.astype(np.int64)


def _macro(total: FloatArray, n: FloatArray) -> FloatArray:
    """Mean over axis 0 of the key means ``total / n`` that exist (NaN if none does)."""
    defined = n > 0
    means = np.where(defined, total / np.where(defined, n, 1.0), 0.0)
    keys = defined.sum(axis=0, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(keys > 0, means.sum(axis=0, keepdims=True) / keys, np.nan)


class Aggregation:
    """A :class:`Breakdown` resolved on one table: point estimates and replicates."""

    def __init__(self, table: ScoreTable, breakdown: Breakdown) -> None:
        self.table = table
        self.breakdown = breakdown
        attrs: dict[str, Attribute] = {}
        self.groupings = [_resolve(d, table, attrs, breakdown) for d in breakdown.dimensions]
        self.partitions = [g for g in self.groupings if g.partition]
        self.atom, self.atom_codes = _atoms(self.partitions, table.n_cells)
        self.width = len(table.models) * len(table.judges)

    def members(self) -> Iterator[tuple[str, str, IntArray]]:
        """Every (dimension, key) of the breakdown with its cells (indices into the
        table, every model's), in report order; ``mean_of`` dimensions have no cells of
        their own and are left out. The one membership the means use, for the statistics
        that work cell by cell (calibration, run comparison)."""
        for g in self.groupings:
            if g.dimension.mean_of is not None:
                continue
            if g.cells is None:
                order = np.argsort(g.code, kind="stable")
                bounds = np.searchsorted(g.code[order], np.arange(len(g.keys) + 1))
                for k, key in enumerate(g.keys):
                    yield g.dimension.shown, key, order[bounds[k] : bounds[k + 1]]
            else:
                for k, key in enumerate(g.keys):
                    yield g.dimension.shown, key, g.cells[g.code == k]

    # -- point estimates ------------------------------------------------------------------

    def _sums(self, group: IntArray, cells: IntArray | None, size: int) -> FloatArray:
        """(4, size, models, judges) sums of the cells (all, or ``cells``) by ``group``."""
        t = self.table
        n_models, n_judges = len(t.models), len(t.judges)
        state = t.state if cells is None else t.state[cells]
        score = t.score if cells is None else t.score[cells]
        model = t.model if cells is None else t.model[cells]
        scored = state == SCORED
        flat = ((group * n_models + model) * n_judges)[:, None] + np.arange(n_judges)
        flat = flat.reshape(-1)
        length = size * n_models * n_judges
        total = np.bincount(flat, np.where(scored, score, 0.0).reshape(-1), length)
        # the three counts in one pass without weights: each judgment's bin and kind
        # (0 open, 1 scored, 2 N/A, 3 failed); ~3x less memory than one pass per count
        kind = scored.view(np.int8) + (state == NA).view(np.int8) * np.int8(2)
        kind += (state == FAILED).view(np.int8) * np.int8(3)
        flat *= 4
        flat += kind.reshape(-1)
        counts = np.bincount(flat, minlength=4 * length).reshape(length, 4)
        out = np.stack([total, *(counts[:, k] for k in (1, 2, 3))]).astype(np.float64)
        return out.reshape(4, size, n_models, n_judges)

    def sums(self) -> dict[str, FloatArray]:
        """Point sums of each dimension: ``(4, keys, models, judges)`` (total, n, N/A,
        failed), micro-averages being ``total / n``; ``mean_of`` dimensions are absent."""
        out: dict[str, FloatArray] = {}
        atoms = self._sums(self.atom, None, len(self.atom_codes))
        flat = atoms.reshape(4, len(self.atom_codes), self.width)
        for k, g in enumerate(self.partitions):
            onehot = np.zeros((len(g.keys), len(self.atom_codes)))
            live = np.flatnonzero(self.atom_codes[:, k] >= 0)
            onehot[self.atom_codes[live, k], live] = 1.0
            out[g.dimension.name] = (onehot @ flat).reshape(4, len(g.keys), *atoms.shape[2:])
        for g in self.groupings:
            if g.cells is not None:
                out[g.dimension.name] = self._sums(g.code, g.cells, len(g.keys))
        return out

    def rows(self) -> list[Row]:
        """Every (model, judge, dimension, key) with at least one judgment, ordered by
        model, judge (names sorted), dimension (breakdown order), then key order."""
        t = self.table
        sums = self.sums()
        judge_rank = np.argsort(np.argsort(np.array(t.judges, dtype=object)))
        found: list[tuple[IntArray, IntArray, IntArray, IntArray, IntArray]] = []
        values: list[FloatArray] = []
        for d, g in enumerate(self.groupings):
            mean_of = g.dimension.mean_of
            if mean_of is None:
                total, n, n_na, n_failed = sums[g.dimension.name]
                with np.errstate(invalid="ignore", divide="ignore"):
                    mean = np.where(n > 0, total / np.where(n > 0, n, 1.0), np.nan)
            else:
                total, n, n_na, n_failed = sums[mean_of]
                mean = _macro(total, n)
                n, n_na, n_failed = (x.sum(axis=0, keepdims=True) for x in (n, n_na, n_failed))
            k, m, j = np.nonzero(n + n_na + n_failed)
            found.append((m, judge_rank[j], np.full(len(k), d, dtype=np.int64), k, j))
            values.append(np.stack([mean[k, m, j], n[k, m, j], n_na[k, m, j], n_failed[k, m, j]]))
        if not found:
            return []
        model, jrank, dim, key, judge = (np.concatenate(c) for c in zip(*found, strict=True))
        stats = np.concatenate(values, axis=1)
        order = np.lexsort((key, dim, jrank, model))
        columns = (model[order], judge[order], dim[order], key[order], stats[:, order].T)
        rows: list[Row] = []
        for mi, ji, di, ki, (mu, c, c_na, c_f) in zip(*(x.tolist() for x in columns), strict=True):
            g = self.groupings[di]
            mu = None if mu != mu else mu  # NaN: nothing scored
            rows.append(
                Row(
                    t.models[mi],
                    t.judges[ji],
                    g.dimension.shown,
                    g.keys[ki],
                    mu,
                    int(c),
                    int(c_na),
                    int(c_f),
                )
            )
        return rows

    # -- bootstrap replicates -------------------------------------------------------------

    @property
    def steps(self) -> int:
        """How often :meth:`replicates` calls ``progress``: once per atom and multi key."""
        multi = sum(len(g.keys) for g in self.groupings if g.cells is not None)
        return len(self.atom_codes) + multi

    def _reps(self, cells: IntArray, weights: Replicates) -> FloatArray:
        """``(2 * models * judges, B)`` replicate sums of ``cells``."""
        inst, block = per_instance(self.table, cells)
        return weights.sums(block, inst)

    def replicates(
        self, weights: FloatArray | Replicates, progress: Progress | None = None
    ) -> Iterator[tuple[str, str, FloatArray]]:
        """``(dimension, key, means)`` for every key: ``means`` is ``(models * judges, B)``
        (column ``model * judges + judge``), NaN where a replicate drew no scored cell.

        ``weights`` (instances, B) come from ``report.bootstrap.instance_weights``. A key is
        yielded as soon as all its atoms are summed, so few replicate arrays live at once.
        """
        shown = {g.dimension.name: g.dimension.shown for g in self.groupings}
        macro: dict[str, list[str]] = {}
        for g in self.groupings:
            if g.dimension.mean_of is not None:
                macro.setdefault(g.dimension.mean_of, []).append(g.dimension.name)
        acc: dict[str, tuple[FloatArray, FloatArray]] = {}

        def done(dimension: str, key: str, reps: FloatArray) -> tuple[str, str, FloatArray]:
            total, count = reps[: self.width], reps[self.width :]
            with np.errstate(invalid="ignore", divide="ignore"):
                means = np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)
            for target in macro.get(dimension, ()):
                s, c = acc.setdefault(target, (np.zeros_like(means), np.zeros_like(means)))
                finite = np.isfinite(means)
                s += np.where(finite, means, 0.0)
                c += finite
            return shown[dimension], key, means

        w = Replicates.of(weights)
        order = np.argsort(self.atom, kind="stable")
        bounds = np.searchsorted(self.atom[order], np.arange(len(self.atom_codes) + 1))
        left = [
            np.bincount(c[c >= 0], minlength=len(g.keys))
            for g, c in zip(self.partitions, self.atom_codes.T, strict=True)
        ]
        open_: dict[tuple[int, int], FloatArray] = {}
        for a in range(len(self.atom_codes)):
            cells = order[bounds[a] : bounds[a + 1]]
            if len(cells) and (self.atom_codes[a] >= 0).any():
                reps = self._reps(cells, w)
                for p, g in enumerate(self.partitions):
                    k = int(self.atom_codes[a, p])
                    if k < 0:
                        continue
                    left[p][k] -= 1
                    held = open_.pop((p, k), None)
                    if held is None and left[p][k] == 0:
                        yield done(g.dimension.name, g.keys[k], reps)
                        continue
                    held = reps.copy() if held is None else held.__iadd__(reps)
                    if left[p][k] == 0:
                        yield done(g.dimension.name, g.keys[k], held)
                    else:
                        open_[(p, k)] = held
            if progress:
                progress(1)
        for g in self.groupings:
            if g.cells is None:
                continue
            by_key = np.argsort(g.code, kind="stable")
            edges = np.searchsorted(g.code[by_key], np.arange(len(g.keys) + 1))
            for k, key in enumerate(g.keys):
                cells = g.cells[by_key[edges[k] : edges[k + 1]]]
                if len(cells):
                    yield done(g.dimension.name, key, self._reps(cells, w))
                if progress:
                    progress(1)
        for g in self.groupings:
            name = g.dimension.name
            if g.dimension.mean_of is not None and name in acc:
                s, c = acc[name]
                means = np.where(c > 0, s / np.where(c > 0, c, 1.0), np.nan)
                yield g.dimension.shown, g.keys[0], means
