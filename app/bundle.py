"""Portable runs: one file holding a run's inputs, configuration, judgments and paid
answers (`export --bundle`), loaded into another store by `import`
(docs/design/bundles.md).

A bundle is gzip-compressed JSON Lines:

- line 1, the header: ``{"format": "flask-eval-bundle", "version": 2, "schema": ...,
  "flask_eval": ..., "run": ..., "tables": {table: [column, ...]}}``;
- then one line per row, ``[table, value, ...]`` in the header's column order
  (``storage.bundle.TABLES`` order: the run, its inputs, the paid answers, the ledger);
- last, the trailer: ``{"end": "flask-eval-bundle", "rows": {table: count}, "sha256": ...}``,
  the SHA-256 of every byte (uncompressed) before it.

Both ends stream: a run of a million judgments is written and read with bounded memory.
Reading checks the whole file first (header, every row counted, checksum) before the store
is even opened, then loads it in one transaction that checks the checksum again at its
end, so a file changed in between writes nothing either.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

from flask_eval.app.bundle_checks import BadRow, RowChecks
from flask_eval.app.bundle_v1 import Sections, upgraded
from flask_eval.core.errors import InputError
from flask_eval.core.files import MIB, open_input, replaced_whole_bytes
from flask_eval.core.jsonl import read_line
from flask_eval.core.redact import redact_known, secret_values
from flask_eval.producer.inputs import check_run_name
from flask_eval.storage import bundle as rows_of
from flask_eval.storage.db import HEAD
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store

FORMAT = "flask-eval-bundle"
#: the format this version writes: 2 holds no stand-in response of a run about instances
#: alone (generation, annotation); 1 did (``app.bundle_v1``)
VERSION = 2
#: the formats this version reads
READS = (1, 2)
WHAT = "a flask-eval bundle (`flask-eval export --bundle`)"
_FLUSH = 1 << 18  # bytes handed to the compressor at once
#: the longest line a bundle holds (its newline aside): the reader never reads more of a
#: line, so that a small file expanding to a huge line cannot fill the memory. A row holds
#: at most one input line's text (1 MiB, ``core.jsonl.MAX_LINE_BYTES``), one answer, or
#: one image as base64 (``core.image_limits.MAX_IMAGE_BYTES``, 20 MiB: 27 MiB of text).
MAX_ROW_BYTES = 32 * MIB
_LONG = "no bundle flask-eval writes holds one: it was changed or damaged"


def _version() -> str:
    try:
        return metadata.version("flask-eval")
    except metadata.PackageNotFoundError:
        return "unknown"


def _revision_number(schema: str) -> int:
    """``0006_v6`` -> 6: the store's revisions are numbered in order."""
    head, _, _ = schema.partition("_")
    if not head.isdigit():
        raise ValueError(schema)
    return int(head)


@dataclass(frozen=True)
class Written:
    """What `export --bundle` wrote: rows per table, bytes on disk, seconds taken."""

    path: Path
    rows: dict[str, int]
    size: int
    seconds: float


def _line(data: Any) -> bytes:
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def export_bundle(store: Store, run: RunInfo, path: str | Path) -> Written:
    """Write ``run`` to ``path`` as a bundle, whole or not at all (``<path>.part`` first)."""
    start = time.perf_counter()
    header = {
        "format": FORMAT,
        "version": VERSION,
        "schema": HEAD,
        "flask_eval": _version(),
        "run": run.name,
        "tables": rows_of.bundle_columns(),
    }
    counts = dict.fromkeys(rows_of.TABLES, 0)
    digest = hashlib.sha256()
    secrets = secret_values()  # taken once: millions of texts may follow
    with (
        replaced_whole_bytes(path) as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as out,
    ):
        buffer = bytearray(_line(header))
        for table, values in rows_of.export_rows(store, run.id):
            # a ledger from before redaction may hold a secret in a stored answer; an
            # image's bytes are no text
            line = _line(
                [table, *values]
                if table == "image"
                else [
                    table,
                    *(redact_known(v, secrets) if isinstance(v, str) else v for v in values),
                ]
            )
            if len(line) > MAX_ROW_BYTES + 1:  # `import` would refuse the bundle
                raise InputError(
                    f"a {table} row of run {run.name} takes {len(line)} bytes, "
                    f"more than a bundle's line may ({MAX_ROW_BYTES})",
                    str(path),
                )
            buffer += line
            counts[table] += 1
            if len(buffer) >= _FLUSH:
                digest.update(buffer)
                out.write(buffer)
                buffer.clear()
        digest.update(buffer)
        out.write(buffer)
        out.write(_line({"end": FORMAT, "rows": counts, "sha256": digest.hexdigest()}))
    target = Path(path)
    return Written(target, counts, target.stat().st_size, time.perf_counter() - start)


@dataclass(frozen=True)
class Bundle:
    """A bundle checked whole: its header and its rows per table."""

    path: str
    header: dict[str, Any]
    rows: dict[str, int]

    @property
    def run(self) -> str:
        return str(self.header["run"])


@contextmanager
def _lines(path: str) -> Iterator[Iterator[bytes]]:
    """The uncompressed lines of ``path``; a file that is not gzip, or damaged or cut
    short, is an InputError."""
    handle: BinaryIO = open_input(path, WHAT)
    with handle, gzip.GzipFile(fileobj=handle, mode="rb") as unzipped:

        def lines() -> Iterator[bytes]:
            number = 0
            try:
                while line := read_line(unzipped, MAX_ROW_BYTES, path, number + 1, _LONG):
                    number += 1
                    yield line
            except EOFError:
                raise InputError(
                    "the bundle is cut short (truncated); export it again", path
                ) from None
            except (gzip.BadGzipFile, zlib.error, OSError) as exc:
                raise InputError(f"not {WHAT}, or a damaged one: {exc}", path) from None

        yield lines()


def _header(path: str, first: bytes | None) -> dict[str, Any]:
    try:
        header = json.loads(first or b"")
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InputError(f"not {WHAT}", path)
    if header.get("version") not in READS:
        raise InputError(
            f"bundle format version {header.get('version')!r} is not supported "
            f"(this flask-eval reads versions {', '.join(map(str, READS))}); use the flask-eval "
            "that wrote it, or a newer one",
            path,
        )
    schema = str(header.get("schema"))
    try:
        newer = _revision_number(schema) > _revision_number(HEAD)
    except ValueError:
        raise InputError(f"the bundle names an unknown schema {schema!r}", path) from None
    if newer:
        raise InputError(
            f"the bundle comes from a newer store (schema {schema}; this "
            f"flask-eval's is {HEAD}): upgrade flask-eval to import it",
            path,
        )
    if not isinstance(header.get("run"), str) or not isinstance(header.get("tables"), dict):
        raise InputError(f"not {WHAT}: its header names no run or tables", path)
    try:
        check_run_name(header["run"])
    except InputError as exc:
        raise InputError(f"the bundle's run name: {exc.message}", path, 1) from None
    return header


def _trailer(
    path: str, last: bytes | None, digest: str, rows: dict[str, int], counts: bool = True
) -> None:
    try:
        trailer = json.loads(last or b"")
    except (ValueError, RecursionError):
        trailer = None
    if not isinstance(trailer, dict) or trailer.get("end") != FORMAT:
        raise InputError("the bundle is cut short (no trailer line); export it again", path)
    if trailer.get("sha256") != digest:
        raise InputError(
            "the bundle's checksum does not match its content: it was changed "
            "or damaged after it was written; export it again",
            path,
        )
    expected = {**dict.fromkeys(rows_of.TABLES, 0), **rows}
    given = trailer.get("rows")
    if isinstance(given, dict):  # a bundle from before a table existed does not count it
        given = {**dict.fromkeys(rows_of.OPTIONAL - set(given), 0), **given}
    if counts and given != expected:
        raise InputError("the bundle's row counts do not match its rows", path)


def _parsed(line: bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        raise BadRow("not a bundle row (not JSON)") from None


def check_bundle(path: str) -> Bundle:
    """Read the whole bundle once: its header (format, version, schema), every row (its
    table, and the ledger's invariants: ``app.bundle_checks``) and its trailer (checksum,
    counts). InputError, one line naming the line, if anything is off."""
    digest = hashlib.sha256()
    rows: dict[str, int] = {}
    with _lines(path) as lines:
        first = next(lines, None)
        header = _header(path, first)
        digest.update(first or b"")
        try:
            checks = RowChecks(header["tables"])
        except BadRow as exc:
            raise InputError(str(exc), path, 1) from None
        wrong: InputError | None = None  # the first row found wrong (a checksum first)
        last = None
        try:
            for number, line in enumerate(lines, start=1):
                if last is not None:
                    digest.update(last)
                    if wrong is None:
                        try:
                            table = checks.row(_parsed(last))
                            rows[table] = rows.get(table, 0) + 1
                        except BadRow as exc:
                            wrong = InputError(str(exc), path, number)
                last = line
        finally:
            checks.close()
    _trailer(path, last, digest.hexdigest(), rows, counts=wrong is None)
    if wrong is not None:
        raise wrong
    if rows.get("run") != 1:
        raise InputError(f"not {WHAT}: it holds {rows.get('run', 0)} runs", path)
    return Bundle(path, header, rows)


@dataclass(frozen=True)
class Loaded:
    """What `import` wrote."""

    run: str
    rows: dict[str, int]
    answers_found: int
    answers_copied: int
    seconds: float


def import_bundle(store: Store, bundle: Bundle, name: str | None = None) -> Loaded:
    """Load a checked bundle into ``store`` as the run ``name`` (default: its own name),
    in one transaction. InputError, nothing written, if a run of that name exists."""
    start = time.perf_counter()
    name = check_run_name(name) if name is not None else bundle.run
    if rows_of.run_exists(store, name):
        hint = "" if name != bundle.run else "; import it under another name with --as NAME"
        raise InputError(f"a run named {name!r} exists in this store{hint}", bundle.path)
    total = sum(bundle.rows.values())
    digest = hashlib.sha256()

    def rows() -> Iterator[tuple[str, list[Any]]]:
        with _lines(bundle.path) as lines:
            first = next(lines, b"")
            digest.update(first)
            for number, line in enumerate(itertools.islice(lines, total), start=2):
                digest.update(line)
                try:
                    table, *values = json.loads(line)
                except (ValueError, TypeError, RecursionError):
                    raise InputError("not a bundle row", bundle.path, number) from None
                yield str(table), values
            _trailer(bundle.path, next(lines, None), digest.hexdigest(), bundle.rows)

    sections: Sections = (
        (t, (v for _, v in group)) for t, group in itertools.groupby(rows(), key=lambda row: row[0])
    )
    columns = bundle.header["tables"]
    if bundle.header.get("version") == 1:  # as version 2 holds it
        sections = upgraded(sections, columns)
    done = rows_of.import_rows(store, name, columns, sections)
    return Loaded(
        name, done.rows, done.answers_found, done.answers_copied, time.perf_counter() - start
    )
