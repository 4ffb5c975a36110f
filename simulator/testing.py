"""Run the simulator from tests and benchmarks.

- ``running_simulator(config)``: in-process, in a background thread with its own loop.
- ``spawn_simulator(config)``: in a separate OS process (does not steal the client's CPU).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from .config import SimConfig
from .serving import serve

#: seconds a simulator may take to start: deadlines, not speeds (a fresh interpreter's
#: imports take seconds on a loaded machine)
STARTUP_TIMEOUT_S = 120.0
#: seconds a ``/stats`` call may take: the in-thread simulator shares this process's CPU
#: with the client it serves, hundreds of connections at a time in some tests
STATS_TIMEOUT_S = 60.0
LISTENING_PREFIX = "simulator listening on "


class _Endpoint:
    host: str
    port: int

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """For ``openai.OpenAI(base_url=...)``."""
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For ``anthropic.Anthropic(base_url=...)``."""
        return self.base_url

    @property
    def gemini_base_url(self) -> str:
        """For ``google.genai.Client(http_options={"base_url": ...})``: the SDK adds
        ``/v1beta/models/MODEL:generateContent``."""
        return self.base_url

    def _call(self, method: str, path: str) -> dict[str, Any]:
        req = urllib.request.Request(f"{self.base_url}{path}", method=method)
        if method == "POST":
            req.data = b""
        with urllib.request.urlopen(req, timeout=STATS_TIMEOUT_S) as resp:
            data: dict[str, Any] = json.loads(resp.read())
        return data

    def stats(self) -> dict[str, Any]:
        """``GET /stats``."""
        return self._call("GET", "/stats")

    def reset_stats(self) -> dict[str, Any]:
        """``POST /stats/reset``."""
        return self._call("POST", "/stats/reset")


class SimHandle(_Endpoint):
    """A simulator running in a background thread of this process."""

    def __init__(self, config: SimConfig, host: str = "127.0.0.1") -> None:
        self.config = config
        self.host = host
        self.port = 0
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="judge-simulator", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(port: int) -> None:
                self.port = port
                self._ready.set()

            await serve(self.config, self.host, 0, stop=self._stop, on_ready=ready)

        try:
            asyncio.run(main())
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(STARTUP_TIMEOUT_S):
            raise RuntimeError("judge simulator did not start in time")
        if self._error is not None or not self.port:
            raise RuntimeError("judge simulator failed to start") from self._error

    def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stop.set)
        self._thread.join(timeout=10)


@contextmanager
def running_simulator(config: SimConfig | None = None) -> Iterator[SimHandle]:
    """Run a simulator on a free 127.0.0.1 port in a background thread."""
    handle = SimHandle(config or SimConfig())
    handle.start()
    try:
        yield handle
    finally:
        handle.stop()


def config_to_argv(config: SimConfig) -> list[str]:
    """Command-line flags of ``python -m simulator`` reproducing ``config`` (ValueError
    for a ``replay`` table: it is served in-process only)."""
    if config.replay:
        raise ValueError("a replay table is served in-process only (running_simulator)")
    argv = [
        "--latency-ms",
        repr(float(config.latency_ms)),
        "--latency-dist",
        config.latency_dist,
        "--error-rate",
        repr(float(config.error_rate)),
        "--garbage-rate",
        repr(float(config.garbage_rate)),
        "--rate-limit-rate",
        repr(float(config.rate_limit_rate)),
        "--timeout-rate",
        repr(float(config.timeout_rate)),
        "--na-rate",
        repr(float(config.na_rate)),
        "--sigma",
        repr(float(config.sigma)),
        "--refusal-rate",
        repr(float(config.refusal_rate)),
        "--html-rate",
        repr(float(config.html_rate)),
        "--answer-format",
        config.answer_format,
        "--seed",
        str(config.seed),
        "--cache-prefixes",
        str(config.cache_prefixes),
        "--generation-tokens",
        str(config.generation_tokens),
    ]
    if config.usage:
        argv += ["--usage", json.dumps(dict(config.usage))]
    for name, level in config.generators.items():
        argv += ["--generator", f"{name}={float(level)!r}"]
    for name, levels in config.skill_levels.items():
        for criterion, level in levels.items():
            argv += ["--skill-level", f"{name}:{criterion}={float(level)!r}"]
    for name, traits in config.judges.items():
        argv += [
            "--judge-traits",
            f"{name}:bias={float(traits.bias)!r},noise={float(traits.noise)!r},"
            f"length={float(traits.length_preference)!r},"
            f"position={float(traits.position_bias)!r},inject={float(traits.injection)!r},"
            f"self={float(traits.self_preference)!r},jitter={float(traits.jitter)!r}"
            + (f",family={traits.family}" if traits.family is not None else ""),
        ]
    for model, family in config.model_families.items():
        argv += ["--model-family", f"{model}={family}"]
    if config.quote_response:
        argv.append("--quote-response")
    if config.echo_headers:
        argv.append("--echo-headers")
    optional = (
        ("--rpm", config.rpm),
        ("--tpm", config.tpm),
        ("--score", config.score),
        ("--min-max-tokens", config.min_max_tokens),
        ("--require-key", config.require_key),
        ("--stop-reason", config.stop_reason),
        ("--malformed", config.malformed),
        ("--slots", config.slots),
    )
    for flag, value in optional:
        if value is not None:
            argv += [flag, str(value)]
    return argv


class SimProcess(_Endpoint):
    """A simulator running as a separate OS process (``sys.executable -m simulator``)."""

    def __init__(self, config: SimConfig, host: str = "127.0.0.1") -> None:
        self.config = config
        self.host = host
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self._pump: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        cmd = [sys.executable, "-m", "flask_eval.simulator", "--host", self.host, "--port", "0"]
        self.proc = subprocess.Popen(
            cmd + config_to_argv(self.config),
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        stdout = self.proc.stdout
        assert stdout is not None
        lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            # Keep draining stdout so the child can never block on a full pipe.
            for line in stdout:
                lines.put(line)
            lines.put("")

        self._pump = threading.Thread(target=pump, name="judge-simulator-stdout", daemon=True)
        self._pump.start()
        try:
            while True:
                line = lines.get(timeout=STARTUP_TIMEOUT_S)
                if not line:
                    raise RuntimeError(f"judge simulator exited early (rc={self.proc.wait()})")
                if line.startswith(LISTENING_PREFIX):
                    self.port = int(line.strip().rsplit(":", 1)[1])
                    return
        except queue.Empty:
            self.stop()
            raise RuntimeError("judge simulator process did not start in time") from None
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._pump is not None:
            self._pump.join(timeout=5)
        if proc.stdout is not None and not (self._pump and self._pump.is_alive()):
            proc.stdout.close()

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def spawn_simulator(config: SimConfig | None = None, host: str = "127.0.0.1") -> SimProcess:
    """Start a simulator process on a free port; stop it with ``.stop()`` or ``with``."""
    proc = SimProcess(config or SimConfig(), host)
    proc.start()
    return proc
