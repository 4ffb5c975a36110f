"""`flask-eval simulate` takes every option of ``python -m flask_eval.simulator`` (it plays
models under test with ``--generator``), and the help texts that list wire formats,
providers' keys or base URLs list what the registries hold."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from aiohttp import web
from click.testing import CliRunner

from flask_eval.cli import main
from flask_eval.simulator import server, serving
from flask_eval.simulator.__main__ import build_parser
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.options import WIRE_FORMATS
from flask_eval.simulator.testing import running_simulator
from flask_eval.workers.judge import judge_class, known_providers


def _started(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[Any, list[SimConfig]]:
    """`flask-eval simulate ARGS` with the server's start replaced by a note of its
    configuration."""
    seen: list[SimConfig] = []
    monkeypatch.setattr(serving, "run", lambda config, host, port: seen.append(config))
    return CliRunner().invoke(main, ["simulate", *args]), seen


def test_simulate_plays_models_under_test(monkeypatch: pytest.MonkeyPatch) -> None:
    result, seen = _started(
        monkeypatch,
        "--generator",
        "weak=1.5",
        "--generator",
        "strong=4.5",
        "--generation-tokens",
        "30",
        "--slots",
        "2",
        "--port",
        "0",
    )
    assert result.exit_code == 0, result.output
    [config] = seen
    assert config.generators == {"weak": 1.5, "strong": 4.5} and config.slots == 2
    with running_simulator(config) as sim:  # the configured server answers as the model
        ask = [{"role": "user", "content": "Name three primary colours."}]
        body = {"model": "strong", "max_tokens": 200, "messages": ask}
        request = urllib.request.Request(
            f"{sim.openai_base_url}/chat/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json", "Authorization": "Bearer sk-test"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.load(response)["choices"][0]["message"]["content"]
    assert answer and "[SCORES]" not in answer and "Feedback" not in answer  # no judgment


def test_simulate_has_every_option_of_the_module() -> None:
    module = {s for a in build_parser()._actions for s in a.option_strings} - {"-h", "--help"}
    command = main.get_command(None, "simulate")  # type: ignore[arg-type]
    assert command is not None
    cli = {s for p in command.params for s in getattr(p, "opts", [])}
    assert module <= cli, sorted(module - cli)


def test_a_bad_generator_is_one_line_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    result, seen = _started(monkeypatch, "--generator", "no-level")
    assert result.exit_code == 2 and not seen
    assert len(result.output.strip().splitlines()) == 1 and "NAME=LEVEL" in result.output


def test_the_simulate_help_names_every_wire_format_it_serves() -> None:
    help_text = " ".join(CliRunner().invoke(main, ["simulate", "--help"]).output.split())
    for name in WIRE_FORMATS:
        assert name in help_text, name
    for name, add_routes in server.ROUTES.items():  # each one named is served
        app = web.Application()
        add_routes(app, server.Simulator(SimConfig()))
        assert len(app.router.routes()) > 0, name
    assert "Gemini" in help_text and "OpenAI batches" in help_text


@pytest.mark.parametrize("command", ["run", "worker"])
def test_the_environment_help_lists_every_providers_key_and_base_url(command: str) -> None:
    help_text = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
    for provider in known_providers():
        judge = judge_class(provider)
        if judge.key_env:  # (the tests' in-memory judge has none)
            assert judge.key_env in help_text, provider
        if judge.base_url_env:
            assert judge.base_url_env in help_text, provider
    assert "GOOGLE_GEMINI_BASE_URL" in help_text and "MISTRAL_API_KEY" in help_text
