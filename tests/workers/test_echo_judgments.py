"""A tiny judge that copies its prompt instead of judging: every variant of the copy is a
failure with its reason, never a score, and the run's ending says so (the memory judge,
in-process)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from flask_eval.cli import main
from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.protocol import requested_skills, scores_line
from flask_eval.workers.judge import Message
from flask_eval.workers.providers.memory_judge import MemoryJudge
from tests.conftest import EXAMPLES

#: what SmolLM2-135M wrote in place of rationales: placeholders of its own making and the
#: prompt's instructions, copied
ECHOES = (
    "<one sentence",
    "<three sentences",
    "first write a short rationale (two to four sentences) that cites concrete evidence "
    "from the response, then decide the score.",
)


@pytest.fixture
def echoing_judge() -> Iterator[None]:
    script = MemoryJudge.script

    def answer(messages: Sequence[Message]) -> str:
        skills = requested_skills("\n".join(text_of(m) for m in messages)) or []
        lines = [f"{s}: {ECHOES[k % len(ECHOES)]}" for k, s in enumerate(skills)]
        return "\n".join([*lines, scores_line(dict.fromkeys(skills, 4))])

    MemoryJudge.script = staticmethod(answer)  # type: ignore[assignment]
    yield
    MemoryJudge.script = script  # type: ignore[method-assign]


def test_template_copies_are_failures_with_their_reason(
    tmp_path: Path, echoing_judge: None
) -> None:
    env = {"FLASK_EVAL_DATABASE_URL": f"sqlite:///{tmp_path / 'e.db'}", "FLASK_EVAL_BROKER_URL": ""}
    ran = CliRunner().invoke(
        main,
        [
            "run",
            "--instances",
            str(EXAMPLES / "instances.jsonl"),
            "--responses",
            f"model_a={EXAMPLES / 'model_a.jsonl'}",
            "--judge",
            "memory/j",
            "--run",
            "echo",
            "--limit",
            "4",
            "--quiet",
        ],
        env=env,
    )
    assert ran.exit_code == 1, ran.output
    exported = CliRunner().invoke(main, ["export", "echo"], env=env)
    rows = [json.loads(x) for x in exported.stdout.splitlines() if x.strip()]
    assert rows and all(r["status"] == "failed" for r in rows)
    assert {r["reason"] for r in rows} == {"unparseable"}
    assert all("prompt" in r["detail"] for r in rows), {r["detail"] for r in rows}
    # the run's ending names the cause
    assert "unparseable" in ran.output and "prompt" in ran.output
