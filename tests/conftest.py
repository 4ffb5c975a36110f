"""Shared fixtures (real Redis, RabbitMQ, PostgreSQL; each isolated per test) and the two
tiers of the suite (docs/design/testing.md).

Every test is in one tier, decided at collection, so that a new test lands in the right one
without saying so:

- ``integration``: a test that needs a real service or a process: it uses a service fixture
  (``redis_url``, ``amqp_url``, ``broker_url``, ``postgres_url``, the ``postgres`` case of
  ``database_url``), carries a ``redis``/``postgres``/``integration`` mark, or starts a
  process (it or a function or fixture of the tests it calls uses ``subprocess``,
  ``multiprocessing``, ``flask_eval_process``, ``workers``, ``spawn_simulator``...); and
  an in-process end-to-end test marked ``e2e`` (a whole dataset, a flow of runs and
  reports, every figure of a report: seconds of CPU each).
- ``unit``: everything else; in-process (CliRunner, InProcessTransport, the memory judge,
  the in-thread simulator, SQLite). `make test-unit` runs it: ``-m unit``.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import types
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flask_eval.workers.judge import register_provider

pytest_plugins = ["pytester"]  # tests/test_tiers.py runs a collection of its own

# The in-memory judge is for tests only: users are never offered it.
register_provider("memory", "flask_eval.workers.providers.memory_judge:MemoryJudge")

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "flask_eval" / "examples"
FLASK_DATA = Path(os.environ.get("FLASK_EVAL_FLASK_DATA", REPO.parent / "shared" / "flask-data"))


def _redis_url_of_this_worker() -> str:
    """The Redis database of this test process. Tests flush it, so each pytest-xdist
    worker (gw0, gw1, ...) takes its own: the i-th of FLASK_EVAL_TEST_REDIS_DBS (a comma
    list) if given, else FLASK_EVAL_TEST_REDIS_URL's database + i (mod 16). Written back
    to the environment, so that fixtures reading it elsewhere (the limiter's) agree."""
    url = os.environ.get("FLASK_EVAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    index = int(worker[2:])
    base, _, db = url.rpartition("/")
    dbs = [d.strip() for d in os.environ.get("FLASK_EVAL_TEST_REDIS_DBS", "").split(",") if d]
    chosen = dbs[index % len(dbs)] if dbs else str((int(db or 0) + index) % 16)
    url = f"{base}/{chosen}"
    os.environ["FLASK_EVAL_TEST_REDIS_URL"] = url
    return url


REDIS_URL = _redis_url_of_this_worker()
AMQP_URL = os.environ.get("FLASK_EVAL_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
POSTGRES_URL = os.environ.get(
    "FLASK_EVAL_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def _unavailable(what: str, exc: Exception) -> None:
    # In CI the services must be there (.ci/run starts them): fail loudly. Locally, skip.
    if os.environ.get("CI"):
        pytest.fail(f"{what} unavailable in CI: {exc}")
    pytest.skip(f"{what} unavailable: {exc}")


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A real Redis database, flushed before and after the test."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except Exception as exc:
        _unavailable("Redis", exc)
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


@pytest.fixture
def amqp_url() -> Iterator[str]:
    """A real RabbitMQ; the queues the test declared are deleted afterwards."""
    from kombu import Connection

    from tests.helpers import QUEUES

    try:
        with Connection(AMQP_URL, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:
        _unavailable("RabbitMQ", exc)
    before = len(QUEUES)
    yield AMQP_URL
    with Connection(AMQP_URL) as conn:
        channel = conn.channel()
        for queue in QUEUES[before:]:
            with contextlib.suppress(Exception):
                channel.queue_delete(queue)


@pytest.fixture(params=["redis", "rabbitmq"])
def broker_url(request: pytest.FixtureRequest) -> str:
    """Each worker test runs on a Redis broker and on a RabbitMQ broker."""
    return str(request.getfixturevalue("redis_url" if request.param == "redis" else "amqp_url"))


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test, dropped afterwards."""
    import psycopg

    name = f"flask_eval_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5)
    except Exception as exc:
        _unavailable("PostgreSQL", exc)
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = POSTGRES_URL.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'flask-eval.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each storage test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'flask-eval.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture(params=[("sqlite", "redis"), ("postgres", "rabbitmq")], ids=lambda p: "-".join(p))
def database_and_broker(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A database and a broker for a promise that is the same on every pair: each of the
    four backends once (SQLite with Redis, PostgreSQL with RabbitMQ), not the four pairs."""
    database, broker = request.param
    url = (
        f"sqlite:///{tmp_path / 'flask-eval.db'}"
        if database == "sqlite"
        else str(request.getfixturevalue("postgres_url"))
    )
    return url, str(request.getfixturevalue("redis_url" if broker == "redis" else "amqp_url"))


@pytest.fixture
def flask_data() -> Path:
    if not (FLASK_DATA / "evaluation_set" / "flask_evaluation.jsonl").exists():
        pytest.skip("FLASK data not available (../shared/flask-data)")
    return FLASK_DATA


# --- the tiers ---------------------------------------------------------------------------

#: fixtures that reach a real service: a test using one (even through another fixture) is
#: an integration test
SERVICE_FIXTURES = frozenset(
    {"redis_url", "amqp_url", "broker_url", "postgres_url", "database_and_broker"}
)
#: parametrized fixtures whose named case reaches a real service
SERVICE_PARAMS = {"database_url": "postgres"}
#: marks that say a test needs a real service (or is an integration test, whatever it
#: uses: ``e2e``, an in-process run of a whole dataset, a flow of runs and reports or every
#: figure of a report, seconds of CPU each, runs beside the integration tests so that the
#: unit tier answers in a minute)
SERVICE_MARKS = ("integration", "redis", "postgres", "e2e")
#: modules whose use means a process is started
PROCESS_MODULES = frozenset({"subprocess", "multiprocessing"})
#: names that start one wherever they come from (os.fork, asyncio.create_subprocess_exec...)
PROCESS_NAMES = frozenset(
    {"Popen", "fork", "forkpty", "posix_spawn", "create_subprocess_exec", "create_subprocess_shell"}
)
#: modules of shared helpers: not followed, their process starters are listed instead
HELPER_MODULES = frozenset({"tests.helpers", "tests.conftest"})


def _process_starters() -> frozenset[object]:
    from flask_eval.simulator.testing import SimProcess, spawn_simulator
    from flask_eval.workers.processes import WorkerGroup
    from tests.helpers import flask_eval_process, kill_group, workers

    return frozenset(
        {flask_eval_process, workers, kill_group, WorkerGroup, SimProcess, spawn_simulator}
    )


def _long_runners() -> tuple[frozenset[object], frozenset[object]]:
    """What makes an in-process test take seconds: runs against the simulator; then the
    CLI (reports with their figures)."""
    from click.testing import CliRunner

    from flask_eval.simulator.testing import SimHandle, running_simulator
    from tests.helpers import flask_eval

    return frozenset({running_simulator, SimHandle, flask_eval}), frozenset({CliRunner})


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _uses(fn: Any, targets: frozenset[object], anywhere: frozenset[str], seen: set[object]) -> bool:
    """Whether ``fn`` (its body or nested functions) names one of ``targets``, or a name or
    module in ``anywhere`` wherever it comes from, directly or through a function of the
    tests (followed, not the library)."""
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None or fn in seen:
        return False
    seen.add(fn)
    names = {name for c in _code_objects(code) for name in c.co_names}
    if names & anywhere:  # `import subprocess` in the body too
        return True
    namespace = getattr(fn, "__globals__", {})
    for name in names:
        obj = namespace.get(name)
        if obj is None:
            continue
        if isinstance(obj, types.ModuleType):
            if obj.__name__.split(".")[0] in anywhere:
                return True
            continue
        try:
            if obj in targets:
                return True
        except TypeError:  # unhashable
            continue
        if (
            inspect.isfunction(obj)
            and (obj.__module__ == fn.__module__ or obj.__module__.startswith("tests."))
            and obj.__module__ not in HELPER_MODULES
            and _uses(obj, targets, anywhere, seen)
        ):
            return True
    return False


def _needs(
    item: pytest.Item, starters: frozenset[object], long: frozenset[object]
) -> tuple[bool, bool, bool]:
    """Whether ``item`` starts processes, needs a real service, uses one of ``long``."""
    names = set(getattr(item, "fixturenames", ()))
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs if info is not None else {}
    functions = [getattr(item, "function", None)]
    for name in names:
        functions += [d.func for d in defs.get(name, ())]
    functions = [f for f in functions if f is not None]
    seen: set[object] = set()
    processes = any(_uses(f, starters, PROCESS_MODULES | PROCESS_NAMES, seen) for f in functions)
    seen = set()
    runs = any(_uses(f, long, frozenset(), seen) for f in functions)
    params = getattr(getattr(item, "callspec", None), "params", {})

    def direct(name: str) -> bool:  # an argument parametrized under a fixture's name
        return name in params and all(d.params is None for d in defs.get(name, ()))

    service = (
        any(item.get_closest_marker(mark) for mark in SERVICE_MARKS)
        or any(not direct(name) for name in names & SERVICE_FIXTURES)
        or any(params.get(name) == case for name, case in SERVICE_PARAMS.items())
    )
    return processes, service, runs


#: seconds an integration test may take (real services, processes, a loaded machine)
INTEGRATION_TIMEOUT = 600


#: the xdist group of the tests that measure timing (mark ``serial``): run one after
#: another, beside at most one other group (scripts/test: ``-n 2 --dist loadgroup``)
TIMING_GROUP = "timing"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its tier. The longest first, so that parallel workers do not
    end on one of them: the tests that start processes, then those that run the simulator,
    then those that run the CLI."""
    starters, (runs, cli) = _process_starters(), _long_runners()
    order: dict[str, int] = {}
    for item in items:
        processes, service, running = _needs(item, starters, runs)
        order[item.nodeid] = (
            0 if processes else 1 if running else 2 if _needs(item, starters, cli)[2] else 3
        )
        if processes or service:
            item.add_marker(pytest.mark.integration)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(INTEGRATION_TIMEOUT))
        else:
            item.add_marker(pytest.mark.unit)
        if item.get_closest_marker("serial") and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(TIMING_GROUP))
    # within each kind, those marked slow first (an outage, a kill -9, a minute at a limit)
    items.sort(key=lambda item: (order[item.nodeid], item.get_closest_marker("slow") is None))
