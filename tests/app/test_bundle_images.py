"""A run's images travel in its bundle: exported as base64, imported byte-equal into
another store; an image whose bytes, type, size or pixels are not what its row says, or
that an instance names and the bundle lacks, is refused with one line and nothing is
written; a bundle from before images (no ``image`` table, no instance ``images``) still
imports (docs/design/bundles.md, "Images")."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import struct
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as Pillow

from flask_eval.app.bundle import FORMAT, check_bundle, export_bundle, import_bundle
from flask_eval.core.errors import InputError
from flask_eval.core.image_limits import MAX_PIXELS
from flask_eval.storage.images import run_images
from flask_eval.storage.records import images_of
from flask_eval.storage.store import Store
from tests.app.image_runs import create_image_run, drawn
from tests.helpers import cli_env, flask_eval

SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    b"<script>alert(1)</script></svg>"
)


@pytest.fixture
def bundle(tmp_path: Path) -> tuple[Store, Path]:
    """A store with the run ``pictures`` (3 images) and its bundle."""
    store = Store(f"sqlite:///{tmp_path / 'source.db'}")
    run, _ = create_image_run(store)
    path = tmp_path / "pictures.bundle"
    written = export_bundle(store, run, path)
    assert written.rows["image"] == 3
    return store, path


def rows_of(path: Path) -> tuple[dict[str, Any], list[list[Any]]]:
    header, *rows, _ = (
        json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()
    )
    return header, rows


def write(path: Path, header: dict[str, Any], rows: list[list[Any]]) -> Path:
    """A bundle of ``rows`` with its trailer recomputed, as whoever forges one would."""
    text = b"".join((json.dumps(line) + "\n").encode() for line in [header, *rows])
    counts = Counter(r[0] for r in rows)
    trailer = {
        "end": FORMAT,
        "rows": {t: counts[t] for t in header["tables"]},
        "sha256": hashlib.sha256(text).hexdigest(),
    }
    path.write_bytes(gzip.compress(text + (json.dumps(trailer) + "\n").encode()))
    return path


def forged(
    path: Path, out: Path, change: Callable[[dict[str, Any]], object], table: str = "image"
) -> Path:
    """``path`` with its first ``table`` row changed (``change`` returning False drops it)."""
    header, rows = rows_of(path)
    columns = header["tables"][table]
    at = next(k for k, r in enumerate(rows) if r[0] == table)
    row = dict(zip(columns, rows[at][1:], strict=True))
    if change(row) is False:
        del rows[at]
    else:
        rows[at] = [table, *(row[c] for c in columns)]
    return write(out, header, rows)


def test_images_travel_byte_equal_into_another_store(
    bundle: tuple[Store, Path], tmp_path: Path
) -> None:
    source, path = bundle
    header, rows = rows_of(path)
    assert [r[0] for r in rows[:4]] == ["run", "image", "image", "image"]  # before instances
    assert "data" in header["tables"]["image"]
    target = Store(f"sqlite:///{tmp_path / 'target.db'}")
    loaded = import_bundle(target, check_bundle(str(path)))
    assert loaded.rows["image"] == 3
    before = source.find_run("pictures")
    after = target.find_run("pictures")
    assert before is not None and after is not None
    held = run_images(source, before.id, _digests(source, before.id))
    copied = run_images(target, after.id, _digests(target, after.id))
    assert len(held) == 3 and copied == held  # digests, types, sizes and bytes
    again = tmp_path / "again.bundle"
    export_bundle(target, after, again)
    assert rows_of(again)[1] == rows  # the same rows again


def test_images_travel_through_both_stores(
    bundle: tuple[Store, Path], tmp_path: Path, database_url: str
) -> None:
    """Into SQLite or PostgreSQL and out again: the same image rows."""
    _, path = bundle
    target = Store(database_url)
    try:
        import_bundle(target, check_bundle(str(path)))
        run = target.find_run("pictures")
        assert run is not None
        again = tmp_path / "again.bundle"
        export_bundle(target, run, again)
    finally:
        target.close()
    assert [r for r in rows_of(again)[1] if r[0] == "image"] == [
        r for r in rows_of(path)[1] if r[0] == "image"
    ]


def _digests(store: Store, run_id: int) -> set[str]:
    with store.engine.connect() as conn:
        texts = conn.exec_driver_sql(
            "SELECT images FROM instance WHERE run_id = ?", (run_id,)
        ).scalars()
        return {ref.sha256 for text in texts for ref in images_of(text)}


def _bytes(row: dict[str, Any], data: bytes) -> None:
    row["data"] = base64.b64encode(data).decode()


def _relabelled(row: dict[str, Any], data: bytes, media_type: str) -> None:
    """The row holding ``data`` under its own digest and size (only the type lies)."""
    _bytes(row, data)
    row.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data), media_type=media_type)


def _bomb() -> bytes:
    """A PNG of a few hundred bytes declaring 50,000 x 50,000 pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", 50_000, 50_000, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def _truncated() -> bytes:
    data = drawn("image/png", (30, 60))
    return data[: len(data) // 2]


CASES: list[tuple[str, Callable[[dict[str, Any]], object], str]] = [
    (
        "bytes changed",
        lambda r: _bytes(r, drawn("image/png", (31, 80, 50))),
        "SHA-256 is not its digest",
    ),
    ("not base64", lambda r: r.update(data="not base64!"), "is not base64"),
    ("unknown type", lambda r: r.update(media_type="image/bmp"), "is not one of"),
    (
        "svg labelled png",
        lambda r: _relabelled(r, SVG, "image/png"),
        "no image of",
    ),
    (
        "jpeg labelled png",
        lambda r: _relabelled(r, drawn("image/jpeg", (10, 20)), "image/png"),
        "are JPEG, not the image/png",
    ),
    ("size lies", lambda r: r.update(size=r["size"] + 1), "its size says"),
    ("width lies", lambda r: r.update(width=r["width"] + 1), "its row says"),
    (
        "decompression bomb",
        lambda r: _relabelled(r, _bomb(), "image/png") or r.update(width=50_000, height=50_000),
        f"more than {MAX_PIXELS:,}",
    ),
    ("truncated", lambda r: _relabelled(r, _truncated(), "image/png"), "does not decode"),
]


@pytest.mark.parametrize(("what", "change", "message"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_image_is_refused_naming_its_line(
    bundle: tuple[Store, Path],
    tmp_path: Path,
    what: str,
    change: Callable[[dict[str, Any]], object],
    message: str,
) -> None:
    _, path = bundle
    out = forged(path, tmp_path / "bad.bundle", change)
    with pytest.raises(InputError) as caught:
        check_bundle(str(out))
    text = str(caught.value)
    assert f"{out}:3: image " in text and message in text, text
    assert "\n" not in text


def test_an_image_an_instance_names_and_the_bundle_lacks_is_refused(
    bundle: tuple[Store, Path], tmp_path: Path
) -> None:
    _, path = bundle
    out = forged(path, tmp_path / "missing.bundle", lambda r: False)  # drop the first image
    target = f"sqlite:///{tmp_path / 'target.db'}"
    proc = flask_eval("import", str(out), env=cli_env(target), check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "names image" in proc.stderr and "which the bundle does not hold" in proc.stderr
    assert not (tmp_path / "target.db").exists()  # nothing written, not even a store


def test_an_instance_naming_an_image_otherwise_is_refused(
    bundle: tuple[Store, Path], tmp_path: Path
) -> None:
    _, path = bundle

    def lie(row: dict[str, Any]) -> None:
        refs = json.loads(row["images"])
        refs[0]["media_type"] = "image/gif"
        row["images"] = json.dumps(refs)

    out = forged(path, tmp_path / "lie.bundle", lie, table="instance")
    with pytest.raises(InputError, match="not as the bundle holds it"):
        check_bundle(str(out))


def test_an_svg_bundle_row_is_refused_by_the_cli_and_nothing_is_written(
    bundle: tuple[Store, Path], tmp_path: Path
) -> None:
    _, path = bundle
    out = forged(path, tmp_path / "svg.bundle", lambda r: _relabelled(r, SVG, "image/png"))
    target = f"sqlite:///{tmp_path / 'target.db'}"
    proc = flask_eval("import", str(out), env=cli_env(target), check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr
    assert proc.stderr.count("\n") == 1 and ":3: image " in proc.stderr
    assert not (tmp_path / "target.db").exists()


def test_a_bundle_from_before_images_still_imports(
    bundle: tuple[Store, Path], tmp_path: Path
) -> None:
    """No ``image`` table, no instance ``images``/``history``/``turn``/``conversation``,
    no response ``history``, and a trailer that does not count images (schema 13)."""
    _, path = bundle
    header, rows = rows_of(path)
    new = {"instance": {"turn", "conversation", "history", "images"}, "response": {"history"}}
    keep = {t: [c for c in cols if c not in new.get(t, ())] for t, cols in header["tables"].items()}
    old_rows = []
    for name, *values in rows:
        if name == "image":
            continue
        row = dict(zip(header["tables"][name], values, strict=True))
        old_rows.append([name, *(row[c] for c in keep[name])])
    del keep["image"]
    old = write(tmp_path / "old.bundle", {**header, "schema": "0013_v13", "tables": keep}, old_rows)
    target = Store(f"sqlite:///{tmp_path / 'target.db'}")
    loaded = import_bundle(target, check_bundle(str(old)))
    assert "image" not in loaded.rows and loaded.rows["instance"] == 3
    run = target.find_run("pictures")
    assert run is not None and not _digests(target, run.id)


def test_pillow_reads_the_sample_images_as_their_types() -> None:
    for media_type, name in (("image/png", "PNG"), ("image/jpeg", "JPEG"), ("image/webp", "WEBP")):
        with Pillow.open(io.BytesIO(drawn(media_type, (5, 9)))) as picture:
            assert picture.format == name


@pytest.mark.parametrize(
    ("table", "history", "message"),
    [
        ("instance", "[1]", "instance.history is not a list of earlier turns"),
        ("instance", '[{"user": 1}]', "instance.history is not a list of earlier turns"),
        ("instance", '[{"user": "u", "answer": "x"}]', "instance.history is not a list of"),
        ("response", '[{"text": "a"}]', "response.history is not a list of earlier answers"),
    ],
)
def test_a_conversation_history_of_the_wrong_shape_is_refused(
    bundle: tuple[Store, Path], tmp_path: Path, table: str, history: str, message: str
) -> None:
    """A forged bundle cannot hand a worker earlier turns it could not read."""
    _, path = bundle

    def forge(row: dict[str, Any]) -> None:
        row["history"] = history

    out = forged(path, tmp_path / "history.bundle", forge, table=table)
    with pytest.raises(InputError, match=message) as caught:
        check_bundle(str(out))
    assert "\n" not in str(caught.value)
