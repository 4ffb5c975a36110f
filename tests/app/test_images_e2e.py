"""Images as a user runs them: 40 instances carrying generated charts, shapes and text
(PNG, JPEG, WebP; files named relative to the instances file, some as ``data:`` URIs),
two models, judged on OpenAI, Anthropic and Gemini (the simulator) and by a
Prometheus-Vision judge on an OpenAI-compatible server, through Redis and a real worker
process. The simulator saw each image byte-equal (its SHA-256) in each provider's format,
each request carrying exactly its instance's images; `--dry-run` counts each judge's
image tokens by its provider's rule (``core.image_tokens``), as the simulator billed
them; a rerun makes no call; a bundle carries the images, byte-equal, into a fresh
store, where the report is the same. And the batch lane: judges with ``batch: true`` on
the three providers judge a subset through the providers' batch endpoints, each
batched request carrying its instance's images."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from flask_eval.core.image_tokens import image_tokens
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import SimHandle, running_simulator
from flask_eval.storage.images import run_images
from flask_eval.storage.store import Store
from tests.app.image_inputs import (
    MODELS,
    SKILLS,
    ImageInputs,
    write_image_inputs,
    write_judges,
)
from tests.helpers import cli_env, flask_eval, wait_done, workers
from tests.workers.test_batch_lane import sim_batches

pytestmark = pytest.mark.e2e

INSTANCES = 40
#: judge name -> (provider, model, dialect the simulator sees it in)
Judge = tuple[str, str, str]
LIVE: dict[str, Judge] = {
    "gpt": ("openai", "gpt-4o", "openai"),
    "claude": ("anthropic", "claude-sonnet-4-5", "anthropic"),
    "gem": ("gemini", "gemini-2.5-flash", "gemini"),
    "pv": ("openai", "prometheus-vision-13b", "openai"),
}
#: the batch judges: other models, so that no answer comes from the live judges' cache
BATCHED: dict[str, Judge] = {
    "gpt-b": ("openai", "gpt-4.1", "openai"),
    "claude-b": ("anthropic", "claude-haiku-4-5", "anthropic"),
    "gem-b": ("gemini", "gemini-2.0-flash", "gemini"),
}
BATCH_INSTANCES = 12
_IMAGE_TOKENS = re.compile(r"^(\S+): ([\d,]+) prompt tokens are images'", re.M)


def _spec(provider: str, model: str, sim: SimHandle) -> str:
    url = sim.openai_base_url if provider == "openai" else sim.base_url
    return f"{provider}/{model}@{url}"


def _judges(path: Path, sim: SimHandle, judges: dict[str, Judge], **extra: object) -> str:
    entries: list[dict[str, object]] = []
    for name, (provider, model, _) in judges.items():
        entry: dict[str, object] = {"spec": _spec(provider, model, sim), "name": name}
        if name == "pv":
            entry["protocol"] = "prometheus-vision"
        entries.append(entry | extra)
    return str(write_judges(path, entries))


def _calls_per_instance(name: str) -> int:
    """Calls of one judge per instance: one per model (all skills in one call), or one
    per model and skill (Prometheus-Vision grades one criterion a call)."""
    return len(MODELS) * (len(SKILLS) if name == "pv" else 1)


def _image_tokens(inputs: ImageInputs, judges: dict[str, Judge]) -> dict[str, int]:
    """Each judge's image tokens, over its calls, each image's by its provider's rule
    (``core.image_tokens``, OpenAI's at the default detail); ``total``: all judges'."""
    tokens = {
        name: _calls_per_instance(name)
        * sum(
            image_tokens(provider, model, width, height)
            for instance in inputs.images
            for width, height in inputs.sizes(instance)
        )
        for name, (provider, model, _) in judges.items()
    }
    return tokens | {"total": sum(tokens.values())}


def _dry_run_image_tokens(printed: str) -> dict[str, int]:
    """The image-token figure the dry run prints per judge (and in total)."""
    return {name: int(n.replace(",", "")) for name, n in _IMAGE_TOKENS.findall(printed)}


def _seen(
    records: list[dict[str, Any]], inputs: ImageInputs, judges: dict[str, Judge], batch: bool
) -> dict[str, int]:
    """Check what the simulator saw (``/stats`` ``seen_images``): each request carried
    exactly one instance's images, in their order, byte-equal (the SHA-256 of the bytes it
    decoded), each image's type and size; each judge asked about each instance once a
    call; each provider saw every image. The image tokens it billed each judge."""
    instance_of = {digests: instance for instance, digests in inputs.digests().items()}
    judge_of = {(dialect, model): name for name, (_, model, dialect) in judges.items()}
    files = inputs.files()
    asked: Counter[tuple[str, str]] = Counter()
    billed: Counter[str] = Counter()
    per_provider: defaultdict[str, set[str]] = defaultdict(set)
    for record in records:
        assert record["batch"] is batch
        name = judge_of[record["dialect"], record["model"]]
        digests = tuple(image["sha256"] for image in record["images"])
        asked[name, instance_of[digests]] += 1
        per_provider[record["dialect"]].update(digests)
        for image in record["images"]:
            made = files[image["sha256"]]
            assert (image["media_type"], image["size"]) == (made.media_type, len(made.data))
            billed[name] += image["tokens"]
    assert asked == {(n, i): _calls_per_instance(n) for n in judges for i in inputs.images}
    assert {d: per_provider[d] for _, _, d in judges.values()} == {
        d: set(files) for _, _, d in judges.values()
    }
    return dict(billed) | {"total": sum(billed.values())}


def _report(env: dict[str, str], run: str) -> Any:
    return json.loads(flask_eval("report", run, "--format", "json", env=env).stdout)


def _stored(env: dict[str, str], run: str, digests: Iterable[str]) -> dict[str, tuple[str, bytes]]:
    """digest -> (media type, bytes) of the run's image rows (``storage.images``)."""
    store = Store(env["FLASK_EVAL_DATABASE_URL"])
    try:
        info = store.find_run(run)
        assert info is not None
        found = run_images(store, info.id, set(digests))
        return {sha: (image.ref.media_type, image.data) for sha, image in found.items()}
    finally:
        store.close()


def test_images_judged_on_three_providers_and_prometheus_vision_through_a_worker(
    tmp_path: Path, redis_url: str
) -> None:
    inputs = write_image_inputs(tmp_path / "inputs", INSTANCES)
    files = inputs.files()
    assert len(files) == INSTANCES + INSTANCES // 10  # 4 instances show a large chart too
    assert {m.media_type for m in files.values()} == {"image/png", "image/jpeg", "image/webp"}
    db = tmp_path / "ledger.db"
    calls = INSTANCES * sum(_calls_per_instance(name) for name in LIVE)  # 40 x (2+2+2+4)
    judgments = INSTANCES * len(MODELS) * len(SKILLS) * len(LIVE)
    with running_simulator(SimConfig(seed=11)) as sim:
        env = cli_env(f"sqlite:///{db}", redis_url)
        judges = _judges(tmp_path / "judges.yaml", sim, LIVE)
        args = ["run", *inputs.args(), "--judges", judges, "--run", "pics"]
        # 3. the dry run counts each judge's image tokens by its provider's rule
        dry = flask_eval(*args, "--dry-run", env=env)
        assert "dry run of pics" in dry.stdout and not db.exists()
        expected = _image_tokens(inputs, LIVE)
        assert _dry_run_image_tokens(dry.stdout + dry.stderr) == expected
        # 1. every judgment done, through Redis and a worker process
        started = flask_eval(*args, "--no-wait", "--quiet", env=env)
        assert f"run pics created: {calls} judge calls dispatched" in started.stderr
        with workers(env, processes=1, in_flight=32, log=tmp_path / "w.log"):
            st = wait_done(env, "pics", timeout=240)
            assert st["done"] == st["total"] == judgments
            stats = sim.stats()
            # 4. a rerun makes no call
            again = flask_eval(*args, "--quiet", env=env)
            assert sim.stats()["requests"] == stats["requests"] == calls
        assert "run pics resumed: 0 judge calls dispatched" in again.stderr
    # 2. each image arrived byte-equal in each provider's format, with its instance
    billed = _seen(stats["seen_images"], inputs, LIVE, batch=False)
    assert billed == expected  # the simulator billed what the dry run counted
    assert stats["images"] == calls + INSTANCES // 10 * sum(map(_calls_per_instance, LIVE))
    # 5. a bundle carries the images byte-equal into a fresh store; the same report
    bundle = tmp_path / "pics.bundle"
    flask_eval("export", "pics", "--bundle", str(bundle), env=env)
    fresh = cli_env(f"sqlite:///{tmp_path / 'fresh.db'}")
    flask_eval("import", str(bundle), env=fresh)
    original = _stored(env, "pics", files)
    assert original == {sha: (m.media_type, m.data) for sha, m in files.items()}
    assert _stored(fresh, "pics", files) == original
    assert _report(fresh, "pics") == _report(env, "pics")


def test_image_requests_through_each_providers_batch_endpoint(
    tmp_path: Path, redis_url: str
) -> None:
    inputs = write_image_inputs(tmp_path / "inputs", BATCH_INSTANCES)
    calls = BATCH_INSTANCES * len(MODELS) * len(BATCHED)
    with running_simulator(SimConfig(seed=12)) as sim:
        env = cli_env(
            f"sqlite:///{tmp_path / 'ledger.db'}", redis_url, FLASK_EVAL_BATCH_POLL_SECONDS="0.1"
        )
        judges = _judges(tmp_path / "batch.yaml", sim, BATCHED, batch=True, batch_max_wait=0.5)
        args = ["run", *inputs.args(), "--judges", judges, "--run", "pics-batch"]
        started = flask_eval(*args, "--no-wait", "--quiet", env=env)
        assert f"run pics-batch created: {calls} judge calls dispatched" in started.stderr
        with workers(env, processes=1, in_flight=32, log=tmp_path / "w.log"):
            st = wait_done(env, "pics-batch", timeout=240)
        stats = sim.stats()
        submitted = {p: sim_batches(sim, p) for p in ("openai", "anthropic", "gemini")}
    assert st["done"] == st["total"] == calls * len(SKILLS)
    assert st["batch_calls"] == calls  # every answer a batch's
    for provider, seen in submitted.items():
        assert len(seen["calls"]) == BATCH_INSTANCES * len(MODELS), provider
        assert set(seen["calls"].values()) == {1}, provider  # each call submitted once
    billed = _seen(stats["seen_images"], inputs, BATCHED, batch=True)
    assert billed == _image_tokens(inputs, BATCHED)
