"""core.settings: every variable validated up front, a ConfigError naming it."""

from __future__ import annotations

import os

import pytest

from flask_eval.core import settings
from flask_eval.core.errors import ConfigError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("FLASK_EVAL_"):
            monkeypatch.delenv(name)


def test_defaults(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(str(tmp_path))
    loaded = settings.load()
    assert loaded.database_url == f"sqlite:///{os.getcwd()}/flask-eval.db"
    assert loaded.broker_url is None
    assert (loaded.calls_per_message, loaded.max_attempts) == (64, 6)
    assert (loaded.lease_seconds, loaded.visibility_timeout) == (60.0, 120.0)
    assert (loaded.judge_timeout, loaded.db_retry_seconds) == (120.0, 300.0)
    assert loaded.queue == "flask_eval"


def test_empty_variables_mean_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FLASK_EVAL_LEASE_SECONDS", "FLASK_EVAL_MAX_ATTEMPTS", "FLASK_EVAL_QUEUE"):
        monkeypatch.setenv(name, " ")
    loaded = settings.load()
    assert (loaded.lease_seconds, loaded.max_attempts, loaded.queue) == (60.0, 6, "flask_eval")


@pytest.mark.parametrize(
    ("name", "value", "field", "expected"),
    [
        ("FLASK_EVAL_CALLS_PER_MESSAGE", "1", "calls_per_message", 1),
        ("FLASK_EVAL_CALLS_PER_MESSAGE", "10000", "calls_per_message", 10_000),
        ("FLASK_EVAL_MAX_ATTEMPTS", " 100 ", "max_attempts", 100),
        ("FLASK_EVAL_LEASE_SECONDS", "1", "lease_seconds", 1.0),
        ("FLASK_EVAL_LEASE_SECONDS", "86400", "lease_seconds", 86_400.0),
        ("FLASK_EVAL_VISIBILITY_TIMEOUT", "604800", "visibility_timeout", 604_800.0),
        ("FLASK_EVAL_JUDGE_TIMEOUT", "1.5", "judge_timeout", 1.5),
        ("FLASK_EVAL_DB_RETRY_SECONDS", "0", "db_retry_seconds", 0.0),
        ("FLASK_EVAL_DB_RETRY_SECONDS", "2.5", "db_retry_seconds", 2.5),
        ("FLASK_EVAL_QUEUE", "test-abc.1:x", "queue", "test-abc.1:x"),
        ("FLASK_EVAL_ADAPTIVE", "0", "adaptive", False),
        ("FLASK_EVAL_ADAPTIVE", "1", "adaptive", True),
    ],
)
def test_values_in_range_are_taken(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, field: str, expected: object
) -> None:
    monkeypatch.setenv(name, value)
    assert getattr(settings.load(), field) == expected


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("FLASK_EVAL_CALLS_PER_MESSAGE", "0.5", "is not a whole number"),
        ("FLASK_EVAL_CALLS_PER_MESSAGE", "0", "is out of range"),
        ("FLASK_EVAL_CALLS_PER_MESSAGE", "10001", "is out of range"),
        ("FLASK_EVAL_CALLS_PER_MESSAGE", "-3", "is not a whole number"),
        ("FLASK_EVAL_CALLS_PER_MESSAGE", "1e3", "is not a whole number"),
        ("FLASK_EVAL_CALLS_PER_MESSAGE", "٣", "is not a whole number"),  # an Arabic-Indic 3
        ("FLASK_EVAL_MAX_ATTEMPTS", "nan", "is not a whole number"),
        ("FLASK_EVAL_MAX_ATTEMPTS", "9" * 5000, "is out of range"),
        ("FLASK_EVAL_MAX_ATTEMPTS", "0", "is out of range"),
        ("FLASK_EVAL_LEASE_SECONDS", "nan", "is not a finite number"),
        ("FLASK_EVAL_LEASE_SECONDS", "inf", "is not a finite number"),
        ("FLASK_EVAL_LEASE_SECONDS", "1e12", "is out of range"),
        ("FLASK_EVAL_LEASE_SECONDS", "0.5", "is out of range"),
        ("FLASK_EVAL_LEASE_SECONDS", "a minute", "is not a number"),
        ("FLASK_EVAL_VISIBILITY_TIMEOUT", "-inf", "is not a finite number"),
        ("FLASK_EVAL_VISIBILITY_TIMEOUT", "1e9", "is out of range"),
        ("FLASK_EVAL_JUDGE_TIMEOUT", "0", "is out of range"),
        ("FLASK_EVAL_JUDGE_TIMEOUT", "nan", "is not a finite number"),
        ("FLASK_EVAL_DB_RETRY_SECONDS", "-1", "is out of range"),
        ("FLASK_EVAL_DB_RETRY_SECONDS", "NaN", "is not a finite number"),
        ("FLASK_EVAL_QUEUE", "a b", "is not a queue name"),
        ("FLASK_EVAL_QUEUE", "q" * 201, "is not a queue name"),
        ("FLASK_EVAL_ADAPTIVE", "yes", "is neither 1 (on) nor 0 (off)"),
        ("FLASK_EVAL_ADAPTIVE", "2", "is neither 1 (on) nor 0 (off)"),
    ],
)
def test_values_out_of_range_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        settings.load()
    text = str(info.value)
    assert text.startswith(name) and message in text, text
    assert len(text) < 300 and "\n" not in text, text


def test_the_visibility_timeout_must_outlast_the_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLASK_EVAL_LEASE_SECONDS", "600")
    assert settings.load().visibility_timeout == 1200.0  # default: twice the lease
    monkeypatch.setenv("FLASK_EVAL_VISIBILITY_TIMEOUT", "600")
    with pytest.raises(ConfigError, match="must be longer than FLASK_EVAL_LEASE_SECONDS"):
        settings.load()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///flask-eval.db",
        "sqlite:////tmp/x/flask-eval.db",
        "sqlite+pysqlite:///x.db",
        "postgresql://postgres@127.0.0.1:5432/test",
        "postgres://u:p@h/db",
        "postgresql+psycopg://h/db?sslmode=require",
    ],
)
def test_database_urls_that_workers_can_share(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("FLASK_EVAL_DATABASE_URL", url)
    assert settings.load().database_url == url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://", "in-memory SQLite database is not supported"),
        ("sqlite:///", "in-memory SQLite database is not supported"),
        ("sqlite:///:memory:", "in-memory SQLite database is not supported"),
        ("sqlite:///file:db?mode=memory&uri=true", "in-memory SQLite database is not supported"),
        ("sqlite://flask-eval.db", "sqlite:///PATH (three slashes)"),
        ("mysql://root:hunter2pw@h/db", "must be sqlite:///PATH or postgresql://..., got mysql://"),
        ("flask-eval.db", "got a value without a scheme://"),
    ],
)
def test_database_urls_refused_up_front(
    monkeypatch: pytest.MonkeyPatch, url: str, message: str
) -> None:
    monkeypatch.setenv("FLASK_EVAL_DATABASE_URL", url)
    with pytest.raises(ConfigError) as info:
        settings.load()
    assert message in str(info.value) and "hunter2pw" not in str(info.value)
    assert str(info.value).startswith("FLASK_EVAL_DATABASE_URL")


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:6379/0", "rediss://h:6380/1", "amqp://guest:guest@h:5672//", "memory://"],
)
def test_broker_urls_celery_can_use(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("FLASK_EVAL_BROKER_URL", url)
    assert settings.load().broker_url == url


@pytest.mark.parametrize("url", ["http://u:hunter2pw@h:6379", "hunter2pw", "sqs://k:hunter2pw@"])
def test_broker_urls_refused_without_printing_them(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("FLASK_EVAL_BROKER_URL", url)
    with pytest.raises(ConfigError, match="FLASK_EVAL_BROKER_URL must be") as info:
        settings.load()
    assert "hunter2pw" not in str(info.value)


def _readme_table(header: str) -> list[list[str]]:
    """The rows of the README table whose header row starts with ``header``."""
    from pathlib import Path

    lines = (Path(__file__).parents[2] / "README.md").read_text().splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_readme_gives_every_setting_with_its_real_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The README's settings table names every setting and each numeric default is what
    :func:`core.settings.load` gives in an empty environment."""
    for name in [k for k in os.environ if k.startswith("FLASK_EVAL_")]:
        monkeypatch.delenv(name)
    loaded = settings.load()
    rows = {row[0].strip("`"): row[1] for row in _readme_table("variable")}
    quoted = (settings.__doc__ or "").split("``")[1::2]
    documented = {w for w in quoted if w.startswith("FLASK_EVAL_")}
    assert len(documented) >= 10
    assert documented <= set(rows), f"missing from the README: {documented - set(rows)}"
    numeric = 0
    for variable, default in rows.items():
        attribute = variable.removeprefix("FLASK_EVAL_").lower()
        if default.replace(".", "", 1).isdigit():
            numeric += 1
            assert getattr(loaded, attribute) == float(default), variable
    assert numeric >= 7


def test_the_readme_gives_the_judges_real_default_sampling() -> None:
    from flask_eval.core.types import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE
    from flask_eval.workers.providers.compatible import COMPATIBLE

    table = _readme_table("provider")
    rows = {row[0].split("`")[1]: row[3] for row in table}
    assert set(rows) == {"openai", "anthropic", "gemini", "mistral"}  # mistral: the table's row
    compatible = next(row[0] for row in table if "`mistral`" in row[0])
    assert all(f"`{name}`" in compatible for name in COMPATIBLE)  # every one named
    for provider, sampling in rows.items():
        assert f"`max_tokens` {DEFAULT_MAX_TOKENS}" in sampling, provider
    for provider in ("openai", "gemini", "mistral"):
        assert f"`temperature` {DEFAULT_TEMPERATURE:g}" in rows[provider], provider
    assert "no temperature" in rows["anthropic"]  # the SDK's messages.create takes none
