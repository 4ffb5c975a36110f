"""Portable runs: `export --bundle` writes a run whole into one file, `import` loads it
into another store (SQLite or PostgreSQL), where the report is the same and a rerun pays
nothing; a bundle changed, cut short, of another version or of a newer store is refused
with one line, and nothing is written (docs/design/bundles.md)."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flask_eval.app.bundle import FORMAT
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from flask_eval.storage.bundle import TABLES
from flask_eval.storage.db import HEAD
from tests.app.test_cost import INPUTS
from tests.helpers import cli_env, flask_eval

SECRET = "sk-bundle-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_simulator(SimConfig(seed=3, na_rate=0.1)) as handle:
        yield handle


def judge_args(sim: SimHandle) -> list[str]:
    return ["--judge", f"openai/sim-gpt@{sim.openai_base_url}"]


def run_once(sim: SimHandle, url: str, run: str = "r1") -> None:
    env = cli_env(url, OPENAI_API_KEY=SECRET)
    flask_eval(
        "run", *INPUTS, *judge_args(sim), "--run", run, "--quiet", env=env, check=False
    )  # garbage answers may fail a judgment: exit 1


def report(url: str, run: str) -> dict[str, object]:
    out = flask_eval("report", run, "--format", "json", "--quiet", env=cli_env(url)).stdout
    data: dict[str, object] = json.loads(out)
    return data


def status(url: str, run: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(
        flask_eval("status", run, "--json", env=cli_env(url)).stdout
    )
    return data


def export(url: str, path: Path, run: str = "r1") -> None:
    flask_eval("export", run, "--bundle", str(path), env=cli_env(url))


def refused(url: str, *args: str) -> str:
    """Stderr of a command that must refuse: exit 2, one line."""
    proc = flask_eval(*args, env=cli_env(url), check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


def lines(path: Path) -> list[bytes]:
    return gzip.decompress(path.read_bytes()).splitlines(keepends=True)


def rewrite(path: Path, content: list[bytes]) -> None:
    path.write_bytes(gzip.compress(b"".join(content)))


@pytest.fixture(scope="module")
def source(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A store with run r1 judged against the simulator, and its bundle."""
    folder = tmp_path_factory.mktemp("source")
    url = f"sqlite:///{folder / 'source.db'}"
    run_once(sim, url)
    export(url, folder / "r1.bundle")
    return url, folder / "r1.bundle"


def test_a_bundle_reports_the_same_in_another_store_and_a_rerun_pays_nothing(
    sim: SimHandle, source: tuple[str, Path], tmp_path: Path
) -> None:
    url, bundle = source
    target = f"sqlite:///{tmp_path / 'target.db'}"
    proc = flask_eval("import", str(bundle), env=cli_env(target))
    paid = status(url, "r1")["calls"]
    assert "imported run r1" in proc.stderr and f"{paid} paid answers" in proc.stderr
    assert report(target, "r1") == report(url, "r1")
    assert status(target, "r1") == status(url, "r1")
    assert (
        flask_eval("export", "r1", env=cli_env(target)).stdout
        == flask_eval("export", "r1", env=cli_env(url)).stdout
    )
    before = sim.stats()["requests"]
    run_once(sim, target)  # the same run: nothing left to judge
    run_once(sim, target, "again")  # a new run of the same inputs: the answer cache
    assert sim.stats()["requests"] == before
    again = status(target, "again")
    assert again["pending"] == 0 and again["calls"] == 0


def test_import_as_another_name_into_the_same_store(
    source: tuple[str, Path], tmp_path: Path
) -> None:
    _, bundle = source
    store = f"sqlite:///{tmp_path / 'copy.db'}"
    flask_eval("import", str(bundle), env=cli_env(store))
    stderr = refused(store, "import", str(bundle))
    assert "a run named 'r1' exists" in stderr and "--as NAME" in stderr
    proc = flask_eval("import", str(bundle), "--as", "r1-copy", env=cli_env(store))
    paid = status(store, "r1")["calls"]
    assert f"{paid} copied" in proc.stderr  # each answer the copy paid for is its own
    original, copy = report(store, "r1"), report(store, "r1-copy")
    assert {**copy, "run": "r1"} == original
    assert {**status(store, "r1-copy"), "run": "r1"} == status(store, "r1")
    flask_eval("runs", "delete", "r1", "--yes", env=cli_env(store))
    assert {**report(store, "r1-copy"), "run": "r1"} == original


def test_the_bundle_holds_no_secret_and_names_its_format(source: tuple[str, Path]) -> None:
    _, bundle = source
    raw = gzip.decompress(bundle.read_bytes())
    assert SECRET.encode() not in raw and SECRET.encode() not in bundle.read_bytes()
    header, *rows, trailer = (json.loads(line) for line in raw.splitlines())
    assert (header["format"], header["version"], header["schema"]) == (FORMAT, 2, HEAD)
    assert trailer["rows"]["judgment"] == len([r for r in rows if r[0] == "judgment"]) > 0
    assert rows[0][0] == "run" and "id" not in header["tables"]["judgment"]


def test_a_changed_byte_is_refused_and_nothing_is_written(
    source: tuple[str, Path], tmp_path: Path
) -> None:
    _, bundle = source
    content = lines(bundle)
    at = next(i for i, line in enumerate(content) if line.startswith(b'["judgment"'))
    content[at] = content[at].replace(b'"done"', b'"done" ', 1)  # one byte more, valid JSON
    changed = tmp_path / "changed.bundle"
    rewrite(changed, content)
    target = tmp_path / "target.db"
    assert "checksum does not match" in refused(f"sqlite:///{target}", "import", str(changed))
    flipped = tmp_path / "flipped.bundle"  # one byte of the compressed file
    data = bytearray(bundle.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    refused(f"sqlite:///{target}", "import", str(flipped))
    assert not target.exists()  # the store was not even opened


def test_a_truncated_bundle_is_refused(source: tuple[str, Path], tmp_path: Path) -> None:
    _, bundle = source
    target = f"sqlite:///{tmp_path / 'target.db'}"
    cut = tmp_path / "cut.bundle"
    cut.write_bytes(bundle.read_bytes()[: bundle.stat().st_size // 2])
    assert "cut short" in refused(target, "import", str(cut))
    no_trailer = tmp_path / "no-trailer.bundle"
    rewrite(no_trailer, lines(bundle)[:-1])
    assert "cut short" in refused(target, "import", str(no_trailer))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 3}, "bundle format version 3 is not supported"),
        ({"schema": "9999_v9999"}, "comes from a newer store (schema 9999_v9999"),
        ({"format": "something-else"}, "not a flask-eval bundle"),
    ],
)
def test_another_version_or_a_newer_schema_is_refused(
    source: tuple[str, Path], tmp_path: Path, change: dict[str, object], message: str
) -> None:
    _, bundle = source
    content = lines(bundle)
    content[0] = (json.dumps({**json.loads(content[0]), **change}) + "\n").encode()
    other = tmp_path / "other.bundle"
    rewrite(other, content)
    assert message in refused(f"sqlite:///{tmp_path / 'target.db'}", "import", str(other))
    assert not (tmp_path / "target.db").exists()


def test_a_name_clash_writes_nothing(source: tuple[str, Path]) -> None:
    url, bundle = source
    before = status(url, "r1")
    assert "--as NAME" in refused(url, "import", str(bundle))
    runs = flask_eval("runs", env=cli_env(url)).stdout.splitlines()
    assert len(runs) == 2 and status(url, "r1") == before  # a header and r1


def test_bad_files_are_refused_with_one_line(tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    assert "file not found" in refused(target, "import", str(tmp_path / "missing.bundle"))
    assert "is a directory" in refused(target, "import", str(tmp_path))
    garbage = tmp_path / "garbage.bundle"
    garbage.write_bytes(b"\x00\xffnot a bundle at all\n" * 10)
    assert "not a flask-eval bundle" in refused(target, "import", str(garbage))
    text = tmp_path / "text.jsonl.gz"
    text.write_bytes(gzip.compress(b'{"id": 1}\n'))
    assert "not a flask-eval bundle" in refused(target, "import", str(text))
    empty = tmp_path / "empty.bundle"
    empty.write_bytes(b"")
    refused(target, "import", str(empty))
    assert not (tmp_path / "target.db").exists()


def test_exporting_a_run_that_does_not_exist_writes_nothing(
    source: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = source
    path = tmp_path / "out" / "nothing.bundle"
    assert "no run named 'nope'" in refused(url, "export", "nope", "--bundle", str(path))
    assert "drop --format" in refused(url, "export", "r1", "--bundle", str(path), "--format", "csv")
    assert not path.exists() and not path.with_name("nothing.bundle.part").exists()


def test_a_bundle_from_postgresql_reports_the_same_in_sqlite(
    sim: SimHandle, postgres_url: str, tmp_path: Path
) -> None:
    """Issue 23's promise 5: PostgreSQL -> SQLite, the JSON reports equal, a rerun against
    the imported store makes no call and is done; and back into PostgreSQL (COPY) under
    another name."""
    run_once(sim, postgres_url)
    bundle = tmp_path / "r1.bundle"
    export(postgres_url, bundle)
    sqlite = f"sqlite:///{tmp_path / 'imported.db'}"
    flask_eval("import", str(bundle), env=cli_env(sqlite))
    assert report(sqlite, "r1") == report(postgres_url, "r1")
    before = sim.stats()["requests"]
    for run in ("r1", "rerun"):
        flask_eval(
            "run",
            *INPUTS,
            *judge_args(sim),
            "--run",
            run,
            "--quiet",
            env=cli_env(sqlite, OPENAI_API_KEY=SECRET),
        )  # exit 0: done
    assert sim.stats()["requests"] == before
    rerun = report(sqlite, "rerun")  # the same scores, read from the imported answers
    assert {**rerun, "run": "r1", "cost": []} == {**report(postgres_url, "r1"), "cost": []}
    back = tmp_path / "from-sqlite.bundle"
    export(sqlite, back, "r1")
    flask_eval("import", str(back), "--as", "r1-back", env=cli_env(postgres_url))
    assert {**report(postgres_url, "r1-back"), "run": "r1"} == report(postgres_url, "r1")


def forge(
    bundle: Path,
    out: Path,
    table: str,
    change: Callable[[dict[str, Any]], object],
    which: Callable[[dict[str, Any]], bool] = lambda row: True,
) -> int:
    """Write ``out``: ``bundle`` with the first ``table`` row that ``which`` picks changed
    by ``change`` (a dict of column -> value, changed in place; returning False drops the
    row) and its trailer recomputed (counts, SHA-256), as whoever forges a bundle would.
    The bundle's line number (1 = the header) of the row."""
    header, *rows, _ = lines(bundle)
    columns = json.loads(header)["tables"][table]
    for at, line in enumerate(rows):  # noqa: B007  # the row found is rows[at]
        name, *values = json.loads(line)
        row = dict(zip(columns, values, strict=True)) if name == table else {}
        if row and which(row):
            break
    else:
        raise AssertionError(f"no {table} row to change")
    if change(row) is False:
        del rows[at]
    else:
        rows[at] = (json.dumps([table, *(row[c] for c in columns)]) + "\n").encode()
    counts = Counter(json.loads(line)[0] for line in rows)
    trailer = {
        "end": FORMAT,
        "rows": {t: counts[t] for t in TABLES},
        "sha256": hashlib.sha256(header + b"".join(rows)).hexdigest(),
    }
    rewrite(out, [header, *rows, (json.dumps(trailer) + "\n").encode()])
    return at + 2


def _done(row: dict[str, Any]) -> bool:
    return row["status"] == "done" and row["score"] is not None and row["call_uid"] is not None


@pytest.mark.parametrize(
    ("table", "change", "which", "message"),
    [
        ("judgment", lambda r: r.update(score=99), _done, "judgment.score 99 is off judge"),
        (
            "judgment",
            lambda r: r.update(status="failed", reason="timeout"),
            _done,
            "on a failed row",
        ),
        ("judgment", lambda r: r.update(status="finished"), _done, "judgment.status is not one of"),
        (
            "judgment",
            lambda r: r.update(status="failed", score=None, reason="bored"),
            _done,
            "judgment.reason of a failed row is not one of",
        ),
        (
            "judgment",
            lambda r: r.update(status="pending", score=None, reason="timeout"),
            _done,
            'judgment.reason "timeout" on a pending row',
        ),
        (
            "judgment",
            lambda r: r.update(call_uid="ab" * 16),
            _done,
            f'points at answer "{"ab" * 16}", which the bundle does not hold',
        ),
        (
            "judgment",
            lambda r: r.update(instance_id="nope"),
            _done,
            'instance "nope", which the bundle does not hold',
        ),
        ("judgment", lambda r: r.update(asks=-1), _done, "judgment.asks is negative: -1"),
        ("call", lambda r: r.update(prompt_tokens=-5), None, "call.prompt_tokens is negative"),
        ("call", lambda r: r.update(cost=-0.5), None, "call.cost is negative: -0.5"),
        (  # PostgreSQL's integer holds no more: refused on every store alike
            "call",
            lambda r: r.update(prompt_tokens=2**31),
            None,
            "call.prompt_tokens is out of range: 2147483648",
        ),
        (
            "call",
            lambda r: r.update(cache_key="A" * 64),
            None,
            "call.cache_key is not 64 lowercase hex digits",
        ),
        ("call", lambda r: r.update(cost="free"), None, "call.cost is not a finite number"),
        ("run", lambda r: r.update(config="[]"), None, "run.config is not a JSON object"),
        ("run", lambda r: r.update(config='{"judges": []}'), None, "run.config names no judges"),
        ("response", lambda r: False, None, "which the bundle does not hold"),
    ],
    ids=[
        "score-off-scale",
        "score-on-failed",
        "status",
        "reason",
        "reason-on-pending",
        "dangling-answer",
        "unknown-instance",
        "negative-asks",
        "negative-tokens",
        "negative-cost",
        "integer-range",
        "cache-key",
        "cost-type",
        "config-not-object",
        "no-judges",
        "missing-response",
    ],
)
def test_a_forged_row_is_refused_naming_its_line_and_nothing_is_written(
    source: tuple[str, Path],
    tmp_path: Path,
    table: str,
    change: Callable[[dict[str, Any]], object],
    which: Callable[[dict[str, Any]], bool] | None,
    message: str,
) -> None:
    """The checksum matches (recomputed): only the checks of each row's invariants
    (app.bundle_checks) refuse it, with one line naming the line, before the store is
    opened."""
    _, bundle = source
    forged = tmp_path / "forged.bundle"
    number = forge(bundle, forged, table, change, which or (lambda row: True))
    if table == "response":  # the dropped response's first judgment is refused
        header, *rows = (json.loads(line) for line in lines(forged)[:-1])
        cols = ["table", *header["tables"]["judgment"]]
        dropped = dict(
            zip(
                ["table", *header["tables"]["response"]],
                next(json.loads(x) for x in lines(bundle) if x.startswith(b'["resp')),
                strict=True,
            )
        )
        number = 2 + next(
            at
            for at, values in enumerate(rows)
            if values[0] == "judgment"
            and (row := dict(zip(cols, values, strict=True)))["instance_id"]
            == dropped["instance_id"]
            and dropped["model"] in (row["model"], row["model_b"])
        )
    target = tmp_path / "target.db"
    stderr = refused(f"sqlite:///{target}", "import", str(forged))
    assert stderr.startswith(f"error: {forged}:{number}: ") and message in stderr, stderr
    assert not target.exists()
