"""The simulator's start-up lines: where it listens, then each provider's base URL."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anthropic
import openai
import pytest

from flask_eval.simulator.testing import LISTENING_PREFIX
from tests.helpers import REPO

START_TIMEOUT_S = 120  # a deadline: a fresh interpreter's imports are slow on a loaded machine
BASE_URL_LINE = re.compile(r"(?P<var>[A-Z_]+_BASE_URL)=(?P<url>\S+)")


@contextmanager
def simulator_banner(*args: str) -> Iterator[list[str]]:
    """Start ``args`` (a simulator command) on a free port; its first three stdout lines."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_BASE_URL", None)
    env.pop("ANTHROPIC_BASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", *args, "--host", "127.0.0.1", "--port", "0"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    stdout = proc.stdout
    assert stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:  # keep draining so the simulator never blocks on a full pipe
        for line in stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        banner = []
        for _ in range(3):
            try:
                banner.append(lines.get(timeout=START_TIMEOUT_S).rstrip("\n"))
            except queue.Empty:
                pytest.fail(f"the simulator printed only {banner} in {START_TIMEOUT_S}s")
        yield banner
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize(
    "command", [("flask_eval.simulator",), ("flask_eval", "simulate")], ids=["python-m", "cli"]
)
def test_start_up_prints_the_listening_line_then_both_base_urls(command: tuple[str, ...]) -> None:
    with simulator_banner(*command) as (listening, openai_line, anthropic_line):
        # the first line is unchanged: simulator/testing.py parses it
        assert listening.startswith(LISTENING_PREFIX)
        base = listening.removeprefix(LISTENING_PREFIX)
        assert re.fullmatch(r"http://127\.0\.0\.1:[1-9][0-9]*", base), listening
        urls = {}
        for line, provider in ((openai_line, "OpenAI"), (anthropic_line, "Anthropic")):
            assert provider in line, line
            found = BASE_URL_LINE.search(line)
            assert found is not None, line
            urls[found["var"]] = found["url"]
        assert urls == {"OPENAI_BASE_URL": f"{base}/v1", "ANTHROPIC_BASE_URL": base}

        # and the URLs are the ones the SDKs need
        gpt = openai.OpenAI(base_url=urls["OPENAI_BASE_URL"], api_key="sk-test", max_retries=0)
        claude = anthropic.Anthropic(
            base_url=urls["ANTHROPIC_BASE_URL"], api_key="sk-test", max_retries=0
        )
        with gpt, claude:
            asked = gpt.chat.completions.create(
                model="sim", messages=[{"role": "user", "content": "hello"}]
            )
            told = claude.messages.create(
                model="sim", max_tokens=64, messages=[{"role": "user", "content": "hello"}]
            )
        assert asked.choices[0].message.content
        assert told.content
