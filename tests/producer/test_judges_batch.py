"""Batch mode in the judges file: its keys, their types, and a provider or server without
a batch API refused naming file:line, exit 2, before anything is written."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flask_eval.core.errors import InputError
from flask_eval.producer.judges_file import load_judges_file
from flask_eval.simulator.testing import running_simulator
from flask_eval.workers.batching import check_batch_spec
from flask_eval.workers.judge import spec_of
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "judges.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_batch_keys_are_read(tmp_path: Path, provider: str) -> None:
    """Each provider with a batch API is accepted with ``batch: true`` on the simulator
    (its server serves that provider's batch endpoints)."""
    with running_simulator() as sim:
        url = sim.openai_base_url if provider == "openai" else sim.base_url
        path = write(
            tmp_path,
            f"- spec: {provider}/m@{url}\n  batch: true\n"
            "  batch_max_wait: 2.5\n  batch_max_size: 100\n"
            "  batch_max_tokens: 50000\n",
        )
        [judge] = load_judges_file(path, spec_of, check_batch_spec)
    assert (judge.batch, judge.batch_max_wait, judge.batch_max_size, judge.batch_max_tokens) == (
        True,
        2.5,
        100,
        50_000,
    )


@pytest.mark.parametrize(
    ("body", "line", "said"),
    [
        ("  batch: yes please\n", 2, "`batch` must be true or false"),
        ("  batch: true\n  batch_max_wait: -1\n", 3, "`batch_max_wait` must be a positive"),
        ("  batch: true\n  batch_max_size: 1.5\n", 3, "`batch_max_size` must be a whole"),
        ("  batch: true\n  batch_max_size: 1000001\n", 3, "at most 100_000"),
        ("  batch: true\n  batch_max_tokens: true\n", 3, "`batch_max_tokens` must be a whole"),
        ("  batch_max_wait: 60\n", 2, "`batch_max_wait` goes with `batch: true`"),
    ],
)
def test_wrong_batch_values_name_their_line(
    tmp_path: Path, body: str, line: int, said: str
) -> None:
    path = write(tmp_path, "- spec: openai/gpt-5.4\n" + body)
    with pytest.raises(InputError) as caught:
        load_judges_file(path, spec_of, check_batch_spec)
    assert str(caught.value).startswith(f"{path}:{line}: ") and said in str(caught.value)


def test_a_provider_without_a_batch_api_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "- spec: vllm/qwen@http://127.0.0.1:9/v1\n  name: q\n  batch: true\n")
    with pytest.raises(InputError) as caught:
        load_judges_file(path, spec_of, check_batch_spec)
    assert str(caught.value).startswith(f"{path}:3: judge vllm/qwen")
    assert "provider vllm has no batch API" in str(caught.value)


class _NotFound(http.server.BaseHTTPRequestHandler):
    """A local OpenAI-compatible server: chat completions only, 404 for the rest."""

    def do_GET(self) -> None:
        body = b'{"detail": "Not Found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_local_server_without_batches_is_refused_and_nothing_is_written(
    tmp_path: Path, local_server: str
) -> None:
    """`openai/...@http://local/v1` with ``batch: true``: its server answers 404 on
    ``GET /batches``, so `run` exits 2 with one line naming the file and the line of
    ``batch``, and writes no database."""
    db = tmp_path / "ledger.db"
    path = write(tmp_path, f"- spec: openai/local@{local_server}\n  batch: true\n")
    result = flask_eval(
        "run",
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--responses",
        f"a={EXAMPLES / 'model_a.jsonl'}",
        "--judges",
        path,
        env=cli_env(f"sqlite:///{db}"),
        check=False,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}:2: "), result.stderr
    assert "no batch API (GET /batches answered 404)" in lines[0]
    assert not db.exists()
