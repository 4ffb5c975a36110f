"""The raters of a store: add one (a new sign-in token, of which only the hash is kept),
revoke one, list them; import a run's ratings from a file, export them
(``flask-eval raters``; the files' format: ``app/raters_io.py``).

A rater signs in to the rating pages with a link that carries the token in its fragment
(``/rate/signin#token=...``): a browser never sends a fragment to a server, so the token
stays out of request lines, proxies' logs and ``Referer`` headers; the page reads it and
posts it. The token is shown once, when it is made; the store keeps its SHA-256 only
(``app.rater_tokens.hash_token``), so whoever reads the database cannot sign in with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

from flask_eval.app.raters_io import RatingLine, read_ratings, read_score, write_rows
from flask_eval.core.errors import InputError
from flask_eval.core.people import (
    RATE_PORT,
    RaterNameError,
    check_rater_name,
    rater_judge,
    rater_of,
)
from flask_eval.core.text import clip
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.rubrics.grading import protocols_scale
from flask_eval.rubrics.scale import Scale
from flask_eval.storage import people_rows
from flask_eval.storage.people_rows import PersonRow, RaterLine
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

if TYPE_CHECKING:
    from flask_eval.storage.ratings import ImportedRating

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ExportRows",
    "Imported",
    "NewToken",
    "RaterLine",
    "add_rater",
    "check_ratings",
    "import_ratings",
    "rater_lines",
    "rating_rows",
    "read_scores",
    "revoke_rater",
    "run_scale",
    "signin_link",
    "valid_name",
]

#: where the rating pages are served by default (the printed link's host and port)
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = RATE_PORT
#: the sign-in page of the rating pages
SIGNIN_PATH = "/rate/signin"


def valid_name(name: str) -> str:
    """``name`` if it is a rater's name; InputError saying the rule otherwise."""
    try:
        return check_rater_name(name)
    except RaterNameError as exc:
        raise InputError(str(exc)) from None


def signin_link(token: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> str:
    """The sign-in link of ``token``: the token in the fragment, never sent to a server."""
    where = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{where}:{port}{SIGNIN_PATH}#token={quote(token, safe='')}"


@dataclass(frozen=True)
class NewToken:
    """A rater's new token (shown once), and whether it replaced their previous one."""

    name: str
    token: str
    run: str | None
    replaced: bool


def add_rater(store: Store, name: str, run: RunInfo | None, may_view: bool) -> NewToken:
    """Add rater ``name`` (for ``run`` only, or every run) with a new token, or give an
    existing rater a new one: their old token no longer signs in, their sessions end,
    and a revoked rater is back. Only the token's hash is stored."""
    from flask_eval.app.rater_tokens import hash_token, new_token
    from flask_eval.storage import ratings

    name = valid_name(name)
    replaced = any(r.name == name for r in ratings.list_raters(store))
    token = new_token()
    ratings.add_rater(store, name, hash_token(token), None if run is None else run.id, may_view)
    return NewToken(name, token, None if run is None else run.name, replaced)


def revoke_rater(store: Store, name: str) -> None:
    """Revoke rater ``name``'s token and end their sessions (their ratings stay);
    InputError if there is no such rater."""
    from flask_eval.storage import ratings

    name = valid_name(name)
    if not ratings.revoke_rater(store, name):
        raise InputError(f"no rater named {name!r}; `flask-eval raters list` lists them")


def rater_lines(store: Store) -> list[RaterLine]:
    """Every rater by name: their run, whether they may view, when added and revoked."""
    return people_rows.rater_lines(store)


# -- ratings in and out of a run as files (the formats: app/raters_io.py) ---------------

#: the ``value`` of an imported rating's row
IMPORTED_VALUE = json.dumps({"source": "import"})
#: a pairwise verdict as a file writes it
VERDICT_TEXT = {VERDICT_FIRST: "A", VERDICT_SECOND: "B", VERDICT_TIE: "tie"}


def run_scale(run: RunInfo) -> Scale:
    """The scale of the run's scores: its judges' protocols' (and its panels', if its
    configuration names some), spanned."""
    names: list[object] = [j.protocol for j in run.config.every_judge()]
    panels = run.config.to_data().get("panels")
    if isinstance(panels, list):
        names += [p.get("protocol") for p in panels if isinstance(p, dict)]
    return protocols_scale(names)


@dataclass(frozen=True)
class Imported:
    """What an import did: ratings read, newly stored, and found in the ledger already."""

    lines: int
    stored: int
    already: int


def check_ratings(
    store: Store, run: RunInfo, lines: Sequence[RatingLine], path: str
) -> list[ImportedRating]:
    """The rows of ``lines`` for the run's ledger; InputError at ``path:line`` for the
    first line naming what the run does not have, or with a bad score."""
    scores = read_scores(store, run, lines, path)
    from flask_eval.storage.ratings import ImportedRating

    return [
        ImportedRating(
            rater_judge(r.rater),
            r.model,
            r.model_b,
            r.instance_id,
            r.criterion,
            score,
            r.rationale,
            IMPORTED_VALUE,
        )
        for r, score in zip(lines, scores, strict=True)
    ]


@dataclass
class RunItems:
    """What a run has, of the instances a ratings file names (from its ledger)."""

    models: set[str] = field(default_factory=set)
    criteria: dict[str, set[str]] = field(default_factory=dict)
    #: (model, model_b, instance id): every response graded, or pair compared
    items: set[tuple[str, str, str]] = field(default_factory=set)
    #: (model, instance id) of a pairwise item
    paired: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def of(cls, known: set[people_rows.Subject], models: Sequence[str]) -> RunItems:
        found = cls(set(models))
        for model, model_b, instance_id, criterion in known:
            found.models.update((model, model_b))
            found.criteria.setdefault(instance_id, set()).add(criterion)
            found.items.add((model, model_b, instance_id))
            if model_b:
                found.paired.add((model, instance_id))
        found.models.discard("")
        return found

    def problem(self, r: RatingLine, run: str) -> str | None:
        """What of the line's item the run does not have (None: all of it)."""
        if r.model not in self.models:
            return f"unknown model {clip(r.model)}: run {run!r} has {_few(self.models)}"
        if r.model_b and r.model_b not in self.models:
            return f"unknown model_b {clip(r.model_b)}: run {run!r} has {_few(self.models)}"
        if r.instance_id not in self.criteria:
            return f"unknown instance {clip(r.instance_id)} in run {run!r}"
        if r.criterion not in self.criteria[r.instance_id]:
            return (
                f"unknown criterion {clip(r.criterion)} of instance {clip(r.instance_id)}: "
                f"it has {_few(self.criteria[r.instance_id])}"
            )
        if (r.model, r.model_b, r.instance_id) in self.items:
            return None
        if not r.model_b and (r.model, r.instance_id) in self.paired:
            return f"run {run!r} compares responses in pairs: give model_b"
        if r.model_b and (r.model, "", r.instance_id) in self.items:
            return f"run {run!r} grades each response alone: leave model_b empty"
        if r.model_b:
            return (
                f"run {run!r} does not compare {clip(r.model)} with {clip(r.model_b)} "
                f"(in that order) on instance {clip(r.instance_id)}"
            )
        return f"model {clip(r.model)} has no response to instance {clip(r.instance_id)}"


def read_scores(
    store: Store, run: RunInfo, lines: Sequence[RatingLine], path: str
) -> list[int | None]:
    """The score of each of ``lines`` (None: N/A), each line checked against the run:
    InputError at ``path:line`` for the first naming a model, instance, criterion or
    comparison the run does not have, or with a score that is not one."""
    known = people_rows.known_subjects(store, run.id, (r.instance_id for r in lines))
    has = RunItems.of(known, run.config.models)
    allow_na = {str(s.get("name")): bool(s.get("allow_na")) for s in run.config.skills}
    scale = run_scale(run)
    scores = []
    for r in lines:
        problem = has.problem(r, run.name)
        if problem is None and (r.model, r.model_b, r.instance_id, r.criterion) not in known:
            problem = f"run {run.name!r} has no {r.criterion!r} item of that response"
        if problem is not None:
            raise InputError(problem, path, r.line)
        try:
            na = allow_na.get(r.criterion, False)
            scores.append(read_score(r.score, bool(r.model_b), scale.low, scale.high, na))
        except ValueError as exc:
            raise InputError(str(exc), path, r.line) from None
    return scores


def _few(names: set[str], most: int = 5) -> str:
    shown = ", ".join(clip(n, 40) for n in sorted(names)[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def import_ratings(store: Store, run: RunInfo, path: str) -> Imported:
    """Check the ratings file ``path`` whole against the run, then store its ratings
    once (see app/raters_io.py); InputError at ``path:line``, nothing written."""
    from flask_eval.storage import ratings

    lines = read_ratings(path)
    rows = check_ratings(store, run, lines, path)
    stored, already = ratings.import_ratings(store, run.id, rows)
    return Imported(len(lines), stored, already)


def rating_rows(store: Store, run: RunInfo, *, flagged: bool = False) -> ExportRows:
    """The people's ratings of the run as an import file has them (``flagged``: the
    items they flagged instead), sorted by rater, model, model_b, instance, criterion."""
    found = people_rows.people_rows(store, run.id, flagged=flagged)
    pairwise = run.config.pairwise is not None or any(r.model_b for r in found)
    found.sort(key=lambda r: (r.judge, r.model, r.model_b, r.instance_id, r.criterion))
    head = ("model", "model_b") if pairwise else ("model",)
    if flagged:
        fields = (*head, "instance", "rater", "reason")
        items: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        for r in found:
            item = (r.judge, r.model, r.model_b, r.instance_id)
            items.setdefault(item, _row(r, rater_of(r.judge), reason=r.detail or ""))
        return ExportRows(fields, list(items.values()))
    fields = (*head, "instance", "criterion", "rater", "score", "rationale")
    return ExportRows(fields, [_row(r, rater_of(r.judge)) for r in found])


def _row(r: PersonRow, rater: str, **more: Any) -> dict[str, Any]:
    score: int | str | None = r.score
    if r.model_b and r.score is not None:
        score = VERDICT_TEXT.get(r.score, r.score)
    return {
        "model": r.model,
        "model_b": r.model_b,
        "instance": r.instance_id,
        "criterion": r.criterion,
        "rater": rater,
        "score": score,
        "rationale": r.rationale or None,
        **more,
    }


@dataclass(frozen=True)
class ExportRows:
    """An export's columns (keys) and rows."""

    fields: tuple[str, ...]
    rows: list[dict[str, Any]]

    def write(self, out: TextIO, fmt: str) -> None:
        """As CSV (N/A written ``N/A``) or JSON Lines (N/A: ``null``)."""
        rows = self.rows
        if fmt == "csv" and "score" in self.fields:
            rows = [{**r, "score": "N/A" if r["score"] is None else r["score"]} for r in rows]
        write_rows(out, fmt, self.fields, rows)
