"""The prompt the viewer shows for a judgment (app/prompts.py) is the one the worker sent:
rendered with the conversation before the judged turn and with the instruction's images,
its cache key is the key of the call the worker made; an image shows as a line naming
it."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from flask_eval.app.prompts import render_prompt
from flask_eval.core.images import MEDIA_TYPES
from flask_eval.core.types import Instance, Response, ResponseSet
from flask_eval.producer.conversations import expand
from flask_eval.storage import browse
from flask_eval.storage.models import JUDGMENT
from flask_eval.storage.records import RunInfo
from flask_eval.storage.store import Store
from flask_eval.workers.providers.memory_judge import MemoryJudge
from flask_eval.workers.runner import Executor, ExecutorConfig
from tests.app.image_runs import create_image_run
from tests.storage.test_store import SKILLS, open_ids, run_config


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'x.db'}")
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _sees_images(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MemoryJudge, "image_types", tuple(MEDIA_TYPES))


def judge_all(store: Store, run: RunInfo) -> None:
    executor = Executor(store, ExecutorConfig())

    async def go() -> None:
        await executor.run_batch(run.id, open_ids(store, run.id))
        await executor.aclose()

    asyncio.run(go())


def conversation_run(store: Store) -> RunInfo:
    names = SKILLS.names
    users, refs = ["Plan a trip to Hawaii.", "Rewrite it starting with A."], ["Maui.", "A trip."]
    instances = expand(Instance("81", "", "", (names[0], names[1]), (), None), users, refs)
    sets = [
        ResponseSet(
            m,
            f"{m}.jsonl",
            (
                Response(m, "81:t1", f"{m} turn one answer"),
                Response(m, "81:t2", f"{m} turn two", history=(f"{m} turn one answer",)),
            ),
        )
        for m in ("alpha", "beta")
    ]
    run, _ = store.create_run(
        name="talk",
        fingerprint=hashlib.sha256(b"talk").hexdigest(),
        mode="instance",
        config=run_config(),
        instances=instances,
        response_sets=sets,
        judges=["memory/j1"],
    )
    return run


def shown_prompts(store: Store, run: RunInfo, instance: str) -> list[tuple[str, str, bool, str]]:
    """(model, the stored call's cache key, verified, the prompt's text) of each done
    judgment of ``instance``, whose key the viewer's rendering matched."""
    with store.engine.connect() as conn:
        ids = list(
            conn.execute(
                select(JUDGMENT.c.id).where(
                    JUDGMENT.c.run_id == run.id, JUDGMENT.c.instance_id == instance
                )
            ).scalars()
        )
    out = []
    for jid in ids:
        record = browse.judgment(store, run.id, jid)
        assert record is not None and record.call is not None, jid
        assert record.row["status"] == "done"
        prompt = render_prompt(store, run, record)
        text = "\n".join(m["content"] for m in prompt.messages)
        out.append((str(record.row["model"]), record.call["cache_key"], prompt.verified, text))
    return out


def test_a_turn_twos_shown_prompt_is_the_workers(store: Store) -> None:
    run = conversation_run(store)
    judge_all(store, run)
    shown = shown_prompts(store, run, "81:t2")
    assert len(shown) == 4  # 2 models x 2 criteria
    for model, _key, verified, text in shown:
        assert verified
        assert f"{model} turn one answer" in text and "Plan a trip to Hawaii." in text


def test_a_shown_prompt_with_images_is_the_workers(store: Store) -> None:
    run, images = create_image_run(store)
    judge_all(store, run)
    shown = shown_prompts(store, run, "q0")
    assert shown and all(verified for _, _, verified, _ in shown)
    text = shown[0][3]
    for image in images[:2]:  # q0 names the PNG and the JPEG
        ref = image.ref
        line = (
            f"[image: {ref.media_type}, {ref.width}x{ref.height} px, {ref.size:,} bytes, "
            f"sha256 {ref.sha256}]"
        )
        assert line in text
    assert images[2].ref.sha256 not in text
