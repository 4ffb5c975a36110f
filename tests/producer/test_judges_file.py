"""Judges of a run: `--judge [NAME=]SPEC`, judges files, JudgeSpec's base-URL rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from flask_eval.core.errors import ConfigError, FlaskEvalError, InputError
from flask_eval.core.limits import MAX_JUDGE_NAME
from flask_eval.core.types import JudgeConfig, JudgeSpec, Price
from flask_eval.producer.judge_args import combine, parse_judge_arg
from flask_eval.producer.judges_file import load_judges_file
from flask_eval.workers.judge import spec_of
from tests.bad_input_cases import CLI_CASES, REPO_ROOT, BadCase


def _judge_args(case: BadCase) -> tuple[list[str], list[str]] | None:
    """The `--judge` and `--judges` values of a case that has only those."""
    flags, files = [], []
    args = list(case.args)
    while args:
        flag, value = args.pop(0), args.pop(0)
        if flag == "--judge":
            flags.append(value)
        elif flag == "--judges":
            files.append(value)
        else:
            return None
    return (flags, files) if (flags or files) and not case.env else None


JUDGE_CASES = [c for c in CLI_CASES if _judge_args(c) is not None]


@pytest.mark.timeout(10)  # the billion-laughs file must not expand
@pytest.mark.parametrize("case", JUDGE_CASES, ids=lambda c: c.id)
def test_judge_cases_of_the_corpus(case: BadCase, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    parsed = _judge_args(case)
    assert parsed is not None
    with pytest.raises(FlaskEvalError) as info:
        combine(*parsed, spec_of)
    text = str(info.value)
    assert text.startswith(f"{case.where}: " if case.where else ""), text
    assert case.message in text and len(text) < 600 and "\n" not in text, text
    assert not any(secret in text for secret in case.absent), text


def test_a_judges_file_with_every_key(tmp_path: Path) -> None:
    path = tmp_path / "judges.yaml"
    path.write_text(
        "# two judges\n"
        "- spec: openai/local-judge@http://127.0.0.1:8000/v1/\n"
        "  name: gpt4o\n"
        "  rpm: 500\n"
        "  tpm: 200000\n"
        "  max_in_flight: 64\n"
        "  price: {input: 2.5, output: 10}\n"
        "  max_tokens: 4096\n"
        "  temperature: 2\n"
        "  retry_max_tokens: 1000000\n"
        "- spec: anthropic/claude-x\n"
        "  temperature: 0\n"
        "  max_tokens: 1000000\n"
    )
    first, second = load_judges_file(str(path))
    assert first == JudgeConfig(
        name="gpt4o",
        spec="openai/local-judge@http://127.0.0.1:8000/v1",
        rpm=500.0,
        tpm=200_000.0,
        max_in_flight=64,
        price=Price(2.5, 10.0),
        max_tokens=4096,
        temperature=2.0,
        retry_max_tokens=1_000_000,
    )
    assert (second.name, second.temperature) == ("anthropic/claude-x", 0.0)
    assert (second.max_tokens, second.retry_max_tokens) == (1_000_000, None)
    path.write_text("- spec: openai/m\n  retry_max_tokens: 1025\n")  # > the default 1024
    assert load_judges_file(str(path))[0].retry_max_tokens == 1025


def test_judge_names_up_to_the_column_length() -> None:
    longest = "j" * MAX_JUDGE_NAME
    (judge,) = combine([f"{longest}=openai/m"], [])
    assert judge.name == longest
    with pytest.raises(InputError, match="invalid judge name"):
        combine([f"{longest}j=openai/m"], [])


def test_default_names_leave_the_base_url_out() -> None:
    assert parse_judge_arg("openai/m@http://h:1/v1").name == "openai/m"
    assert parse_judge_arg("openai/m@http://h:1/v1").spec == "openai/m@http://h:1/v1"
    judges = combine(["a=openai/m@http://h:1/v1", "b=openai/m@http://h:2/v1"], [])
    assert [(j.name, j.spec) for j in judges] == [
        ("a", "openai/m@http://h:1/v1"),
        ("b", "openai/m@http://h:2/v1"),
    ]
    with pytest.raises(InputError, match="given twice"):
        combine(["openai/m@http://h:1/v1", "OpenAI/m=openai/m@http://h:2/v1"], [])


@pytest.mark.parametrize(
    ("spec", "base"),
    [
        ("openai/m@http://[::1]:8000/v1", "http://[::1]:8000/v1"),
        ("openai/m@https://[2001:db8::1]/v1/", "https://[2001:db8::1]/v1"),
        (
            "openai/m@http://h/openai?api-version=2024-06-01",
            "http://h/openai?api-version=2024-06-01",
        ),
    ],
)
def test_base_urls_accepted(spec: str, base: str) -> None:
    assert JudgeSpec.parse(spec).base_url == base


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("openai/m@http://[::1/v1", "an unclosed or invalid [IPv6] address"),
        ("openai/m@http://[zz::1]/v1", "an unclosed or invalid [IPv6] address"),
        ("openai/m@http://h:0/v1", "invalid port"),
        ("openai/m@http://h:x/v1", "invalid port"),
        ("openai/m@http://h/v 1", "it contains a space"),
        ("openai/m@http://tok3n@h/v1", "credentials in the base URL are not allowed"),
        ("openai/m@http://h/v1?key=s3cret-value", "carries a credential ('key'=...)"),
        ("openai/m@http://h/v1?a=1&Access-Token=s3cret-value", "carries a credential"),
        ("openai/m@http://h/v1?x-api-key=s3cret-value", "OPENAI_API_KEY"),
        ("anthropic/m@http://h?api_key=s3cret-value", "ANTHROPIC_API_KEY"),
        ("openai/" + "m" * 1001, "judge spec is longer than 1000 characters"),
        ("openai/m\udcff", "lone UTF-16 surrogate"),
    ],
)
def test_base_urls_refused(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        spec_of(spec)
    text = str(info.value)
    assert message in text and "s3cret-value" not in text and len(text) < 400, text


def test_a_judges_file_price_with_cache_and_batch_fields_and_a_known_models_rest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "judges.yaml"
    path.write_text(
        "- spec: openai/local@http://127.0.0.1:8000/v1\n"
        "  price: {input: 1, output: 2, cached_input: 0.1, cache_write: 1.5, batch: 0.5}\n"
        "- spec: anthropic/claude-sonnet-4-5-20250929\n"
        "  price:\n"
        "    batch: 1\n"
    )
    local, sonnet = load_judges_file(str(path), spec_of)
    assert local.price == Price(1.0, 2.0, cached_input=0.1, cache_write=1.5, batch=0.5)
    assert sonnet.price == Price(3.0, 15.0, cached_input=0.3, cache_write=3.75, batch=1.0)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "- spec: openai/x\n  price:\n    input: 1\n    batch: 2\n",
            4,
            "`price.batch` must be a number in (0, 1]",
        ),
        (
            "- spec: openai/x\n  price: {input: 1, output: -2}\n",
            2,
            "`price.output` must be a number >= 0, got -2",
        ),
        (
            "- spec: openai/x\n  price:\n    cached_input: cheap\n",
            3,
            "`price.cached_input` must be a number >= 0, got 'cheap'",
        ),
        (
            "- spec: openai/x\n  price:\n    input: 1\n",
            2,
            "`price.output` is missing: 'openai/x' has no known price",
        ),
        ("- spec: openai/x\n  price: 3\n", 2, "`price` must be a mapping of input, output"),
        ("- spec: openai/gpt-5.4\n  price: {input: 1, vat: 0.2}\n", 2, "`price` must be a mapping"),
    ],
)
def test_a_bad_price_is_one_line_naming_the_file_and_the_fields_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = tmp_path / "judges.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_judges_file(str(path), spec_of)
    assert str(err.value).startswith(f"{path}:{line}: {message}"), str(err.value)
    assert "\n" not in str(err.value)
