"""The suite's two tiers are chosen at collection from what a test uses (tests/conftest.py):
a new test lands in its tier without saying so."""

from __future__ import annotations

import pytest

INNER = """
import subprocess

import pytest

from tests.helpers import cli_env, flask_eval, flask_eval_process, workers


def start_a_process():
    subprocess.run(["true"], check=True)


def indirectly():
    start_a_process()


@pytest.fixture
def a_process():
    with workers(cli_env("sqlite:///x.db", "redis://127.0.0.1:1/0")) as proc:
        yield proc


def test_plain(): pass
def test_in_process_cli(sqlite_url): flask_eval("--help", env=cli_env(sqlite_url))
def test_redis(redis_url): pass
def test_amqp(amqp_url): pass
def test_either_broker(broker_url): pass
def test_postgres(postgres_url): pass
def test_database(database_url): pass
def test_pair(database_and_broker): pass
def test_subprocess_here(): start_a_process()
def test_subprocess_two_calls_away(): indirectly()
def test_process_cli(): flask_eval_process("--help", env={})
def test_workers(): workers
def test_process_fixture(a_process): pass
def test_imported_in_the_body():
    import multiprocessing
@pytest.mark.integration
def test_said_so(): pass
@pytest.mark.e2e
def test_whole_dataset_in_process(sqlite_url): pass
@pytest.mark.parametrize("redis_url", ["not a service"])
def test_argument_named_like_a_fixture(redis_url): pass
"""

UNIT = {
    "test_plain",
    "test_in_process_cli",
    "test_database[sqlite]",
    "test_argument_named_like_a_fixture[not a service]",
}
INTEGRATION = {
    "test_redis",
    "test_amqp",
    "test_either_broker[redis]",
    "test_either_broker[rabbitmq]",
    "test_postgres",
    "test_database[postgres]",
    "test_pair[sqlite-redis]",
    "test_pair[postgres-rabbitmq]",
    "test_subprocess_here",
    "test_subprocess_two_calls_away",
    "test_process_cli",
    "test_workers",
    "test_process_fixture",
    "test_imported_in_the_body",
    "test_said_so",
    "test_whole_dataset_in_process",
}


def test_each_test_lands_in_its_tier_by_what_it_uses(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("from tests.conftest import *  # noqa: F403\n")
    pytester.makepyfile(test_inner=INNER)
    recorded = pytester.inline_run("--collect-only", "-p", "no:cacheprovider")
    items = recorded.getcall("pytest_collection_finish").session.items
    tiers = {
        item.name: {m.name for m in item.iter_markers() if m.name in ("unit", "integration")}
        for item in items
    }
    assert tiers == {
        **{name: {"unit"} for name in UNIT},
        **{name: {"integration"} for name in INTEGRATION},
    }
    # the processes first: parallel workers do not end on the longest tests
    order = [item.name for item in items]
    first_service = order.index("test_redis")
    assert {"test_subprocess_here", "test_workers", "test_process_fixture"} <= set(
        order[:first_service]
    )


def test_every_timing_test_is_in_a_file_the_timing_phase_runs() -> None:
    """scripts/test runs the tests marked serial from a list of files (it does not collect
    the whole suite again): a test marked serial elsewhere would run in no phase."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    script = (root / "scripts" / "test").read_text(encoding="utf-8")
    listed = re.search(r"serial_files=\(([^)]*)\)", script)
    assert listed is not None, "scripts/test names no serial_files"
    files = set(listed.group(1).split())
    marked = {
        str(path.relative_to(root))
        for path in (root / "tests").rglob("test_*.py")
        if "mark.serial" in path.read_text(encoding="utf-8") and path.name != "test_tiers.py"
    }
    assert marked and marked <= files, marked - files
    assert all((root / f).is_file() for f in files)
