"""`flask-eval raters`: tokens shown once and stored as hashes only, revoke, list without
secrets, strict imports (FILE:LINE, exit 2, nothing written), each rating stored once,
and exports that import back into a copy of the run as the same ratings."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from flask_eval.core.errors import FailureReason, Status
from flask_eval.storage.models import JUDGMENT, utcnow
from flask_eval.storage.store import Store
from tests.app.test_raters_io import CRITERIA, HEADER, MODELS, make_run, write
from tests.helpers import REPO, cli_env, flask_eval

pytest.importorskip("flask_eval.storage.ratings")
pytest.importorskip("flask_eval.app.rater_tokens")

J = JUDGMENT.c


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A SQLite store holding run r1 (6 instances, two models, two criteria)."""
    path = tmp_path / "ledger.db"
    store = Store(f"sqlite:///{path}")
    make_run(store)
    store.close()
    return path


def env_of(db: Path) -> dict[str, str]:
    return cli_env(f"sqlite:///{db}")


def dump(db: Path) -> list[str]:
    """Every row of the store, as SQL (the WAL's content included)."""
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


def stored_bytes(db: Path) -> bytes:
    """The bytes of the store's files (database, write-ahead log)."""
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def token_of(out: str) -> str:
    return next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("token"))


def human_rows(db: Path) -> list[tuple[object, ...]]:
    store = Store(f"sqlite:///{db}")
    stmt = (
        select(J.judge, J.model, J.instance_id, J.criterion, J.status, J.score, J.rationale)
        .where(J.judge.like("human/%"))
        .order_by(J.judge, J.model, J.instance_id, J.criterion)
    )
    with store.engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(stmt)]
    store.close()
    return rows


def ratings_csv(raters: tuple[str, ...] = ("alice", "bob"), n: int = 6, note: str = "") -> str:
    """A rating by each rater of every (model, instance, criterion) of run r1 (N/A for
    the second criterion of instance 2), its rationale ``note`` and more."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for rater in raters:
        for model in MODELS:
            for i in range(n):
                for criterion in CRITERIA:
                    na = criterion == CRITERIA[1] and i == 2
                    score = "N/A" if na else str(1 + (i + len(rater)) % 5)
                    writer.writerow([model, i, criterion, score, rater, f"{note}{rater} {i}"])
    return HEADER + out.getvalue()


# -- add, revoke, list ------------------------------------------------------------------


def test_add_prints_the_token_once_and_stores_only_its_hash(db: Path) -> None:
    from flask_eval.app.rater_tokens import hash_token

    env = env_of(db)
    out = flask_eval("raters", "add", "alice", "--run", "r1", "--port", "9000", env=env).stdout
    token = token_of(out)
    assert len(token) >= 20
    assert f"http://127.0.0.1:9000/rate/signin#token={token}" in out
    assert "rater alice added, for run r1" in out
    held = stored_bytes(db)
    assert token.encode() not in held
    assert hash_token(token).encode() in held  # the search would have found it
    listed = flask_eval("raters", "list", env=env).stdout
    assert "alice" in listed and "r1" in listed
    assert token not in listed and hash_token(token) not in listed

    again = flask_eval("raters", "add", "alice", env=env).stdout
    new = token_of(again)
    assert new != token
    assert "new token for every run; the old one no longer signs in" in again
    held = stored_bytes(db)
    assert hash_token(new).encode() in held and new.encode() not in held


@pytest.mark.parametrize("name", ["al ice", "-x", "panel", "a" * 41])
def test_a_bad_rater_name_is_one_line_and_exit_2(db: Path, name: str) -> None:
    before = dump(db)
    proc = flask_eval("raters", "add", "--", name, env=env_of(db), check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: invalid rater name") and proc.stderr.count("\n") == 1
    assert dump(db) == before


def test_add_for_an_unknown_run_is_exit_2(db: Path) -> None:
    proc = flask_eval("raters", "add", "alice", "--run", "nope", env=env_of(db), check=False)
    assert proc.returncode == 2 and "no run named 'nope'" in proc.stderr


def test_revoke(db: Path) -> None:
    env = env_of(db)
    flask_eval("raters", "add", "alice", env=env)
    flask_eval("raters", "add", "bob", "--may-view", env=env)
    assert flask_eval("raters", "revoke", "alice", env=env).stdout == "rater alice revoked\n"
    lines = flask_eval("raters", "list", env=env).stdout.splitlines()
    assert lines[0].split() == ["name", "run", "view", "created", "(UTC)", "revoked", "(UTC)"]
    alice, bob = (line.split() for line in lines[1:])
    assert alice[:4] == ["alice", "(every", "run)", "no"] and len(alice) == 8  # revoked
    assert bob[:4] == ["bob", "(every", "run)", "yes"] and bob[-1] == "-"
    unknown = flask_eval("raters", "revoke", "carol", env=env, check=False)
    assert unknown.returncode == 2
    assert unknown.stderr == "error: no rater named 'carol'; `flask-eval raters list` lists them\n"


# -- import -----------------------------------------------------------------------------


def test_import_stores_each_rating_exactly_once(db: Path, tmp_path: Path) -> None:
    env = env_of(db)
    path = write(tmp_path, "ratings.csv", ratings_csv())
    first = flask_eval("raters", "import", path, "--run", "r1", env=env)
    assert "48 ratings, 48 stored, 0 already in the ledger" in first.stderr
    rows = human_rows(db)
    assert len(rows) == 48
    assert {r[4] for r in rows} == {Status.DONE.value}
    assert ("human/alice", "alpha", "2", CRITERIA[1], "done", None, "alice 2") in rows
    before = dump(db)
    second = flask_eval("raters", "import", path, "--run", "r1", env=env)
    assert "48 ratings, 0 stored, 48 already in the ledger" in second.stderr
    assert human_rows(db) == rows
    assert dump(db) == before


BAD_LINES = [
    ("gamma,0,Factuality,4,alice,", "unknown model 'gamma'"),
    ("alpha,9,Factuality,4,alice,", "unknown instance '9'"),
    ("alpha,0,Depth,4,alice,", "unknown criterion 'Depth'"),
    ("alpha,0,Factuality,9,alice,", "score 9 is not on the run's scale 1-5"),
    ("alpha,0,Factuality,N/A,alice,", "N/A is not allowed"),
    ("alpha,0,Factuality,4,al/ice,", "invalid rater name"),
    ("alpha,0,Factuality,4,alice," + "x" * 20_001, "rationale is longer than 20000"),
    ("alpha,1,Factuality,3,bob,", "a second rating by 'bob'"),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES)
def test_a_bad_import_line_is_file_line_exit_2_and_writes_nothing(
    db: Path, tmp_path: Path, line: str, message: str
) -> None:
    good = "alpha,1,Factuality,4,bob,\nbeta,1,Factuality,5,bob,\n"
    path = write(tmp_path, "bad.csv", HEADER + good + line + "\n")
    before = dump(db)
    proc = flask_eval("raters", "import", path, "--run", "r1", env=env_of(db), check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {path}:4: ") and proc.stderr.count("\n") == 1
    assert message in proc.stderr
    assert dump(db) == before


def test_a_bad_jsonl_import_line_is_file_line_exit_2(db: Path, tmp_path: Path) -> None:
    good = {"model": "alpha", "instance": "0", "criterion": "Factuality", "score": 4}
    path = write(
        tmp_path,
        "bad.jsonl",
        json.dumps({**good, "rater": "alice"}) + "\n" + json.dumps({**good, "rater": 7}) + "\n",
    )
    before = dump(db)
    proc = flask_eval("raters", "import", path, "--run", "r1", env=env_of(db), check=False)
    assert proc.returncode == 2
    assert proc.stderr == f"error: {path}:2: rater must be a string, not number\n"
    assert dump(db) == before


# -- export -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_export_imports_into_a_copy_of_the_run_as_the_same_ratings(
    db: Path, tmp_path: Path, fmt: str
) -> None:
    env = env_of(db)
    path = write(tmp_path, "ratings.csv", ratings_csv(note='a "quoted", multi\nline note: '))
    flask_eval("raters", "import", path, "--run", "r1", env=env)
    exported = flask_eval("raters", "export", "--run", "r1", "--format", fmt, env=env).stdout
    lines = exported.splitlines()
    if fmt == "jsonl":
        first = json.loads(lines[0])
        assert list(first) == ["model", "instance", "criterion", "rater", "score", "rationale"]
        assert first["rater"] == "alice" and first["model"] == "alpha"
        assert len(lines) == 48
    else:
        assert lines[0] == "model,instance,criterion,rater,score,rationale"

    copy = tmp_path / "copy" / "ledger.db"
    copy.parent.mkdir()
    store = Store(f"sqlite:///{copy}")
    make_run(store)
    store.close()
    again = write(tmp_path, f"exported.{fmt}", exported)
    done = flask_eval("raters", "import", again, "--run", "r1", env=env_of(copy))
    assert "48 stored, 0 already" in done.stderr
    assert human_rows(copy) == human_rows(db)
    copied = flask_eval("raters", "export", "--run", "r1", "--format", fmt, env=env_of(copy))
    assert copied.stdout == exported


def test_pairwise_export_round_trips_with_verdicts(tmp_path: Path) -> None:
    db, copy = tmp_path / "a.db", tmp_path / "b.db"
    for path in (db, copy):
        store = Store(f"sqlite:///{path}")
        make_run(store, pairs=[("alpha", "beta"), ("beta", "alpha")])
        store.close()
    text = "model,model_b,instance,criterion,score,rater\n" + "".join(
        f"{a},{b},{i},Factuality,{('A', 'B', 'tie')[i % 3]},alice\n"
        for a, b in (("alpha", "beta"), ("beta", "alpha"))
        for i in range(6)
    )
    flask_eval("raters", "import", write(tmp_path, "p.csv", text), "--run", "r1", env=env_of(db))
    exported = flask_eval("raters", "export", "--run", "r1", env=env_of(db)).stdout
    assert exported.splitlines()[:3] == [
        "model,model_b,instance,criterion,rater,score,rationale",
        "alpha,beta,0,Factuality,alice,A,",
        "alpha,beta,1,Factuality,alice,B,",
    ]
    flask_eval(
        "raters", "import", write(tmp_path, "e.csv", exported), "--run", "r1", env=env_of(copy)
    )
    assert flask_eval("raters", "export", "--run", "r1", env=env_of(copy)).stdout == exported


def test_flagged_items_are_listed_apart_and_never_as_ratings(db: Path, tmp_path: Path) -> None:
    env = env_of(db)
    flask_eval(
        "raters",
        "import",
        write(tmp_path, "r.csv", HEADER + "alpha,0,Factuality,4,alice,ok\n"),
        "--run",
        "r1",
        env=env,
    )
    store = Store(f"sqlite:///{db}")
    now = utcnow()
    with store.engine.begin() as conn:
        for criterion in CRITERIA:
            conn.execute(
                JUDGMENT.insert().values(
                    run_id=1,
                    model="beta",
                    model_b="",
                    instance_id="3",
                    criterion=criterion,
                    judge="human/bob",
                    status=Status.FAILED.value,
                    reason=FailureReason.FLAGGED.value,
                    detail="not in a language I read",
                    created_at=now,
                    updated_at=now,
                )
            )
        flagged_rows = conn.execute(select(func.count()).where(J.judge == "human/bob")).scalar()
    store.close()
    assert flagged_rows == 2
    ratings = flask_eval("raters", "export", "--run", "r1", env=env).stdout
    assert ratings.splitlines() == [
        "model,instance,criterion,rater,score,rationale",
        "alpha,0,Factuality,alice,4,ok",
    ]
    out = tmp_path / "flags.csv"
    flask_eval("raters", "export", "--run", "r1", "--flagged", "-o", str(out), env=env)
    assert out.read_text().splitlines() == [
        "model,instance,rater,reason",
        "beta,3,bob,not in a language I read",
    ]


def test_export_into_a_closed_pipe_exits_quietly(db: Path, tmp_path: Path) -> None:
    env = env_of(db)
    raters = tuple(f"r{k}" for k in range(20))  # 190 kB: more than a pipe holds
    path = write(tmp_path, "many.csv", ratings_csv(raters, note="x" * 300))
    flask_eval("raters", "import", path, "--run", "r1", env=env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flask_eval", "raters", "export", "--run", "r1"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"model,instance")
    proc.stdout.close()  # `| head -1`
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0
    assert err == b""


def test_db_names_the_store_instead_of_the_settings(db: Path, tmp_path: Path) -> None:
    elsewhere = cli_env(f"sqlite:///{tmp_path / 'not-this-one.db'}")
    url = f"sqlite:///{db}"
    flask_eval("raters", "add", "alice", "--run", "r1", "--db", url, env=elsewhere)
    assert "alice" in flask_eval("raters", "list", "--db", url, env=elsewhere).stdout
    assert not (tmp_path / "not-this-one.db").exists()
    missing = f"sqlite:///{tmp_path / 'missing.db'}"
    proc = flask_eval("raters", "list", "--db", missing, env=elsewhere, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --db: no flask-eval store")
    assert not (tmp_path / "missing.db").exists()
