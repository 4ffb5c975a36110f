"""Stores made by earlier versions open, migrated, with nothing lost (SQLite, PostgreSQL).

Version 1 is rebuilt here from its table definitions as they were (the ledger keyed by
skill, one ``call`` row per cache key), filled with a finished run, then opened by the
current code.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    inspect,
    select,
)
from sqlalchemy.exc import IntegrityError

from flask_eval.storage import exports, queries
from flask_eval.storage.db import head_revision, normalize_url
from flask_eval.storage.models import CALL, JUDGMENT
from flask_eval.storage.store import Store

V1 = MetaData()
RUN = Table(
    "run",
    V1,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True, index=True),
    Column("fingerprint", String(64), nullable=False),
    Column("mode", String(16), nullable=False),
    Column("config", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
)
INSTANCE = Table(
    "instance",
    V1,
    Column("run_id", Integer, ForeignKey("run.id"), primary_key=True),
    Column("instance_id", String(200), primary_key=True),
    Column("instruction", Text, nullable=False),
    Column("answer", Text, nullable=False),
    Column("skills", Text, nullable=False),
    Column("difficulty", Integer),
)
DOMAIN = Table(
    "instance_domain",
    V1,
    Column("run_id", Integer, ForeignKey("run.id"), primary_key=True),
    Column("instance_id", String(200), primary_key=True),
    Column("domain", String(100), primary_key=True),
)
RESPONSE = Table(
    "response",
    V1,
    Column("run_id", Integer, ForeignKey("run.id"), primary_key=True),
    Column("model", String(100), primary_key=True),
    Column("instance_id", String(200), primary_key=True),
    Column("text", Text, nullable=False),
)
CALL_V1 = Table(
    "call",
    V1,
    Column("id", Integer, primary_key=True),
    Column("cache_key", String(64), nullable=False, unique=True),
    Column("run_id", Integer, ForeignKey("run.id"), nullable=False, index=True),
    Column("judge", String(300), nullable=False),
    Column("raw", Text, nullable=False),
    Column("parsed", Boolean, nullable=False),
    Column("prompt_tokens", Integer, nullable=False),
    Column("completion_tokens", Integer, nullable=False),
    Column("cost", Float, nullable=False),
    Column("latency_ms", Float, nullable=False),
    Column("created_at", DateTime, nullable=False),
)
JUDGMENT_V1 = Table(
    "judgment",
    V1,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("run.id"), nullable=False),
    Column("model", String(100), nullable=False),
    Column("instance_id", String(200), nullable=False),
    Column("skill", String(100), nullable=False),
    Column("judge", String(300), nullable=False),
    Column("status", String(16), nullable=False),
    Column("score", Integer),
    Column("rationale", Text),
    Column("reason", String(32)),
    Column("detail", Text),
    Column("call_key", String(64)),
    Column("attempts", Integer, nullable=False),
    Column("lease_until", DateTime),
    Column("created_at", DateTime, nullable=False),
    Column("updated_at", DateTime, nullable=False),
    UniqueConstraint("run_id", "model", "instance_id", "skill", "judge", name="uq_judgment"),
    Index("ix_judgment_run_status", "run_id", "status"),
)

NOW = datetime(2026, 11, 1, tzinfo=UTC)
SKILLS = ("Factuality", "Readability", "Conciseness")


def make_v1_store(url: str) -> None:
    engine = create_engine(normalize_url(url))
    V1.create_all(engine)
    config = {
        "judges": [{"name": "openai/j", "spec": "openai/j"}],
        "mode": "instance",
        "skills": [],
    }
    with engine.begin() as conn:
        conn.execute(
            RUN.insert().values(
                id=1,
                name="old",
                fingerprint="f" * 64,
                mode="instance",
                config=json.dumps(config),
                created_at=NOW,
            )
        )
        for i in ("1", "2"):
            conn.execute(
                INSTANCE.insert().values(
                    run_id=1,
                    instance_id=i,
                    instruction=f"q{i}",
                    answer=f"a{i}",
                    skills=json.dumps(SKILLS),
                    difficulty=2,
                )
            )
            conn.execute(DOMAIN.insert().values(run_id=1, instance_id=i, domain="Math"))
            conn.execute(RESPONSE.insert().values(run_id=1, model="m", instance_id=i, text="t"))
            key = (i * 64)[:64]
            conn.execute(
                CALL_V1.insert().values(
                    cache_key=key,
                    run_id=1,
                    judge="openai/j",
                    raw=f"answer {i}",
                    parsed=True,
                    prompt_tokens=100,
                    completion_tokens=20,
                    cost=0.5,
                    latency_ms=10.0,
                    created_at=NOW,
                )
            )
            for n, skill in enumerate(SKILLS):
                conn.execute(
                    JUDGMENT_V1.insert().values(
                        run_id=1,
                        model="m",
                        instance_id=i,
                        skill=skill,
                        judge="openai/j",
                        status="done",
                        score=n + 2,
                        rationale="r",
                        call_key=key,
                        attempts=1,
                        created_at=NOW,
                        updated_at=NOW,
                    )
                )
    engine.dispose()


def test_a_version_1_store_is_migrated_with_nothing_lost(database_url: str) -> None:
    make_v1_store(database_url)
    store = Store(database_url)  # opening migrates
    with store.engine.connect() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
        columns = {c["name"] for c in inspect(conn).get_columns("judgment")}
        rows = conn.execute(
            select(
                JUDGMENT.c.criterion,
                JUDGMENT.c.model_b,
                JUDGMENT.c.call_uid,
                JUDGMENT.c.claims,
                JUDGMENT.c.asks,
                JUDGMENT.c.score,
            ).order_by(JUDGMENT.c.id)
        ).all()
        calls = conn.execute(select(CALL.c.uid, CALL.c.cache_key, CALL.c.finish)).all()
        ledger_keys = inspect(conn).get_foreign_keys("judgment")
        response_keys = inspect(conn).get_foreign_keys("response")
    assert version == head_revision()
    # version 10: the ledger has no foreign key to its run; the run's inputs keep theirs
    assert ledger_keys == []
    assert [k["referred_table"] for k in response_keys] == ["run"]
    assert {"criterion", "model_b", "claims", "asks", "requests", "call_uid"} <= columns
    assert "skill" not in columns and "call_key" not in columns
    assert [r.criterion for r in rows] == list(SKILLS) * 2
    assert {(r.model_b, r.claims, r.asks) for r in rows} == {("", 1, 1)}
    assert [r.score for r in rows] == [2, 3, 4] * 2
    assert {(c.uid, c.cache_key, c.finish) for c in calls} == {
        ((i * 64)[:64], (i * 64)[:64], "stop") for i in ("1", "2")
    }
    assert {r.call_uid for r in rows} == {c.uid for c in calls}
    # instances of version 2 and before: no system prompt, own rubrics, capability or task
    with store.engine.connect() as conn:
        instance_columns = {c["name"] for c in inspect(conn).get_columns("instance")}
    assert {"system_prompt", "rubrics", "capability", "task"} <= instance_columns
    back = store.instances(1)
    assert sorted(back) == ["1", "2"]
    assert {(i.system_prompt, len(i.rubrics), i.capability, i.task) for i in back.values()} == {
        ("", 0, None, None)
    }
    assert back["1"].skills == SKILLS and back["1"].domains == ("Math",)
    assert back["1"].difficulty == 2 and back["1"].instruction == "q1"
    # every read works on the migrated store
    counts = queries.status(store, 1, "old")
    assert (counts.done, counts.total, counts.calls, counts.cost) == (6, 6, 2, 1.0)
    exported = list(exports.export_rows(store, 1, "old"))
    assert [r["raw"] for r in exported] == ["answer 1"] * 3 + ["answer 2"] * 3
    # the new key is enforced, and the store opens again without migrating twice
    with pytest.raises(IntegrityError), store.engine.begin() as conn:
        conn.execute(
            JUDGMENT.insert().values(
                run_id=1,
                model="m",
                model_b="",
                instance_id="1",
                criterion="Factuality",
                judge="openai/j",
                status="pending",
                claims=0,
                asks=0,
                requests=0,
                created_at=NOW,
                updated_at=NOW,
            )
        )
    store.close()
    assert queries.status(Store(database_url), 1, "old").done == 6


def test_a_new_store_is_created_at_the_newest_version(database_url: str) -> None:
    store = Store(database_url)
    with store.engine.connect() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
        ledger_keys = inspect(conn).get_foreign_keys("judgment")
    assert version == head_revision()
    assert ledger_keys == []  # as a migrated store's (version 10)


def test_the_head_the_store_checks_without_alembic_is_alembic_s_head() -> None:
    """A new migration must move ``storage.db.HEAD`` too, or every store would be
    migrated again at each opening (and this test fails)."""
    from flask_eval.storage.db import HEAD

    assert head_revision() == HEAD


def test_opening_a_store_at_the_head_does_not_import_alembic(tmp_path: Path) -> None:
    """Start-up: only a new or an older store needs alembic (~0.1 s of imports)."""
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'current.db'}"
    Store(url).close()  # created (and stamped) here
    code = (
        "import sys; from flask_eval.storage.store import Store; "
        f"s = Store({url!r}); s.close(); print('alembic' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip() == "False"


def test_a_version_3_store_gets_the_cache_and_batch_columns_of_its_calls(
    database_url: str,
) -> None:
    """0004_v4: the calls paid before it count no cached or cache-written tokens and were
    not batched (how they were billed); new calls record theirs."""
    from alembic import command

    from flask_eval.storage.db import BASELINE, _alembic_config
    from flask_eval.storage.records import CallRecord

    make_v1_store(database_url)
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as conn:  # the store as version 3 left it
        config = _alembic_config(conn)
        command.stamp(config, BASELINE)
        command.upgrade(config, "0003_v3")
    with engine.connect() as conn:
        assert "cached_tokens" not in {c["name"] for c in inspect(conn).get_columns("call")}
    engine.dispose()
    store = Store(database_url)  # opening migrates to the head
    with store.engine.connect() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
        old = conn.execute(
            select(CALL.c.cached_tokens, CALL.c.cache_write_tokens, CALL.c.batch, CALL.c.cost)
        ).all()
    assert version == head_revision()
    assert [tuple(r) for r in old] == [(0, 0, False, 0.5)] * 2
    new = CallRecord(
        "new",
        "n" * 64,
        1,
        "openai/j",
        "answer 3",
        True,
        "stop",
        100,
        20,
        0.25,
        10.0,
        cached_tokens=60,
        cache_write_tokens=30,
        batch=True,
    )
    store.write([new])
    counts = queries.status(store, 1, "old")
    assert (counts.calls, counts.prompt_tokens, counts.cached_tokens) == (3, 300, 60)
    assert (counts.cache_write_tokens, counts.batch_calls, counts.cost) == (30, 1, 1.25)


def test_a_version_11_store_loses_the_stand_in_of_its_runs_about_instances(
    database_url: str,
) -> None:
    """0012_v12: a generation run of a store as version 11 (flask-eval 0.2.0) left it
    held a stand-in model '' with an empty response to each instance, named in its
    configuration; opened, it holds neither, its ledger unchanged (rows with no model)
    and its open rows still claimed with their instance's texts. A judging run keeps its
    responses."""
    from alembic import command

    from flask_eval.storage.db import BASELINE, _alembic_config
    from flask_eval.storage.models import INSTANCE as INSTANCES
    from flask_eval.storage.models import RESPONSE
    from flask_eval.storage.models import RUN as RUNS

    make_v1_store(database_url)  # run 1: a judging run of model "m"
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as conn:
        config = _alembic_config(conn)
        command.stamp(config, BASELINE)
        command.upgrade(config, "0011_v11")
    stand_in = {
        "kind": "generation",
        "kind_options": {},
        "models": [""],
        "responses": {"": ""},
        "coverage": {"": [2, 2]},
        "skills": [{"name": "response", "rubric": {"1": "not scored"}, "allow_na": False}],
        "judges": [{"name": "m1", "spec": "openai/m1"}],
        "mode": "instance",
    }
    with engine.begin() as conn:
        conn.execute(
            RUNS.insert().values(
                id=2,
                name="gen",
                fingerprint="f" * 64,
                mode="instance",
                config=json.dumps(stand_in),
                created_at=NOW,
            )
        )
        for i in ("1", "2"):
            conn.execute(
                INSTANCES.insert().values(
                    run_id=2,
                    instance_id=i,
                    instruction=f"say {i}",
                    answer="",
                    skills="[]",
                )
            )
            conn.execute(RESPONSE.insert().values(run_id=2, model="", instance_id=i, text=""))
            conn.execute(
                JUDGMENT.insert().values(
                    run_id=2,
                    model="",
                    model_b="",
                    instance_id=i,
                    criterion="response",
                    judge="m1",
                    status="pending",
                    created_at=NOW,
                    updated_at=NOW,
                )
            )
        judged_before = conn.execute(
            select(RESPONSE.c.model, RESPONSE.c.instance_id).where(RESPONSE.c.run_id == 1)
        ).all()
    engine.dispose()
    store = Store(database_url)  # opening migrates to the head
    try:
        with store.engine.connect() as conn:
            version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
            responses = conn.execute(
                select(RESPONSE.c.run_id, RESPONSE.c.model, RESPONSE.c.instance_id)
            ).all()
            rows = conn.execute(
                select(JUDGMENT.c.model, JUDGMENT.c.instance_id).where(JUDGMENT.c.run_id == 2)
            ).all()
        assert version == head_revision()
        assert sorted((m, i) for r, m, i in responses if r == 1) == sorted(judged_before)
        assert [r for r in responses if r[0] == 2] == []
        assert sorted(tuple(r) for r in rows) == [("", "1"), ("", "2")]
        run = store.find_run("gen")
        assert run is not None
        assert (run.config.models, run.config.responses, run.config.coverage) == ((), {}, {})
        # nothing scores the criterion: it carries no rubric; the rest is as it was
        assert run.config.skills == [{"name": "response", "rubric": {}, "allow_na": False}]
        assert run.config.to_data()["judges"] == stand_in["judges"]  # as stored
        # the rows with no response are still claimed, with their instance's texts
        claimed = store.claim_contexts(2, [r.id for r in store.open_rows(2)], 60.0)
        assert sorted((c.instance_id, c.instruction, c.response) for c in claimed) == [
            ("1", "say 1", ""),
            ("2", "say 2", ""),
        ]
    finally:
        store.close()
