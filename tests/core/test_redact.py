"""core.redact: secrets hidden from every message and log line, cheaply."""

from __future__ import annotations

import logging
import os
import re

import pytest

from flask_eval.core import redact as redact_mod
from flask_eval.core.redact import RedactingFilter, looks_like_credential, redact, secret_values


def test_a_variable_set_after_the_first_call_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LATE_API_KEY", raising=False)
    assert redact("value late-secret-123") == "value late-secret-123"
    monkeypatch.setenv("LATE_API_KEY", "late-secret-123")
    assert redact("value late-secret-123") == "value ***"
    assert "late-secret-123" in secret_values()


def test_a_changed_or_removed_variable_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_TOKEN", "first-value-1")
    assert redact("first-value-1") == "***"
    monkeypatch.setenv("SOME_TOKEN", "second-value-2")
    assert redact("first-value-1 second-value-2") == "first-value-1 ***"
    monkeypatch.delenv("SOME_TOKEN")
    assert redact("second-value-2") == "second-value-2"


def test_secret_values_keep_their_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names ending in KEY/TOKEN/SECRET/PASSWORD/PASSWD, values of 6+ characters, longest
    first (so a secret that contains another is hidden whole)."""
    monkeypatch.setenv("A_PASSWORD", "abcdef")
    monkeypatch.setenv("B_SECRET", "abcdefghij")
    monkeypatch.setenv("SHORT_KEY", "abc")
    monkeypatch.setenv("NOT_SECRET_NAME", "zzzzzzzz")
    values = secret_values()
    assert values.index("abcdefghij") < values.index("abcdef")
    assert "abc" not in values and "zzzzzzzz" not in values
    assert redact("abcdefghij") == "***"


class _CountingPattern:
    """Stands in for the secret-name pattern and counts how often names are matched."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.calls = 0

    def search(self, text: str) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.search(text)


def test_the_environment_is_not_rescanned_on_every_line(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = _CountingPattern(redact_mod._SECRET_ENV)
    monkeypatch.setattr(redact_mod, "_SECRET_ENV", counting)
    monkeypatch.setenv("FRESH_API_KEY", "fresh-secret-1")  # a change: one rescan
    for _ in range(200):
        assert redact("log line with fresh-secret-1") == "log line with ***"
    assert counting.calls <= 2 * len(os.environ)  # one scan (or two), not 200


@pytest.mark.parametrize(
    ("text", "hidden", "kept"),
    [
        ("redis://h:6379/0?password=hunter2pw", "hunter2pw", "redis://h:6379/0?password=***"),
        ("redis://:hunter2pw@h:6379/0", "hunter2pw", "redis://:***@h:6379/0"),
        ("'redis://u:hun@ter2pw@h:1/0'", "ter2pw", "'redis://u:***@h:1/0'"),
        ("postgresql://u@h/db?sslmode=require&password=pw123", "pw123", "sslmode=require&"),
        ("https://h/v1?api-version=2024&api_key=k-123", "k-123", "api-version=2024&api_key=***"),
        ("amqp://guest:guestpw@h:5672//", "guestpw", "amqp://guest:***@h"),
        ("x?access_token=t0k3n&sig=s1g y", "t0k3n", "access_token=***&sig=*** y"),
        ("Bearer abcdefghijkl and sk-abcdefghijkl", "abcdefghijkl", "***"),
    ],
)
def test_urls_and_tokens_are_redacted(text: str, hidden: str, kept: str) -> None:
    out = redact(text)
    assert hidden not in out and kept in out, out


def test_ordinary_query_parameters_stay() -> None:
    text = "http://h/v1?api-version=2024-06-01&model=m&q=a b"
    assert redact(text) == text


@pytest.mark.parametrize(
    "name",
    ["api_key", "key", "apikey", "access_token", "password", "secret", "sig", "X-Amz-Signature"],
)
def test_credential_names(name: str) -> None:
    assert looks_like_credential(name)


@pytest.mark.parametrize("name", ["api-version", "model", "q", "deployment", "region"])
def test_names_that_are_not_credentials(name: str) -> None:
    assert not looks_like_credential(name)


def test_the_log_filter_redacts_formatted_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOG_TEST_TOKEN", "log-secret-99")
    record = logging.LogRecord(
        "t",
        logging.INFO,
        __file__,
        1,
        "broker %s key %s",
        ("redis://h/0?password=pw9", "log-secret-99"),
        None,
    )
    assert RedactingFilter().filter(record)
    assert record.getMessage() == "broker redis://h/0?password=*** key ***"


@pytest.mark.parametrize(
    "text",
    [
        "flask-eval-4242-0@vm ready.",  # Celery's line when a worker is up
        "run r1: 1 worker(s) take queue 'flask-eval' (celery@flask-eval-4242-0@vm) but none "
        "uses this database",  # the producer's message for a worker on another database
        "disk-usage-monitor-01 task-12345678 risk-assessment-v2",
    ],
)
def test_a_node_or_host_name_is_not_a_credential(text: str) -> None:
    """``sk-`` inside a word (``flask-eval-...``) is not an API key: the worker's own
    name, and Celery's line about it, are shown whole."""
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "sk-abcdefghijkl",
        "key sk-abcdefghijkl",
        "api_key=sk-proj-abcdefghijkl",
        '{"key": "sk-ant-api03-abcdefghijkl"}',
        "(sk-abcdefghijkl)",
        "--api-key=sk-abcdefghijkl",
        "worker flask-eval-1-0@vm sent sk-abcdefghijkl",
    ],
)
def test_a_key_that_starts_a_word_is_still_hidden(text: str) -> None:
    assert "abcdefghijkl" not in redact(text)


def test_a_judge_key_variable_is_secret_whatever_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from flask_eval.core.redact import redact_known, secret_variable

    monkeypatch.setenv("MY_LLM_CRED", "plain-value-1234")
    assert redact("x plain-value-1234") == "x plain-value-1234"  # not a secret's name
    secret_variable("MY_LLM_CRED")
    assert redact("x plain-value-1234") == "x ***"
    assert redact_known("x plain-value-1234") == "x ***"


def test_a_judge_text_loses_known_secrets_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a judge wrote keeps what merely looks like a key (it may quote the response
    it judges); the environment's secret values go."""
    from flask_eval.core.redact import redact_known

    monkeypatch.setenv("OPENAI_API_KEY", "real-key-value-42")
    text = "quoted sk-example-0000000 and ?token=abc; echoed Bearer real-key-value-42"
    assert redact_known(text) == "quoted sk-example-0000000 and ?token=abc; echoed Bearer ***"
