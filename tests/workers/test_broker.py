"""The broker side: password-protected and TLS Redis, and graceful worker shutdown."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from flask_eval.producer.synthetic import write_inputs
from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from flask_eval.storage.store import Store
from tests.helpers import cli_env, flask_eval, status, wait_done, wait_until, workers

PASSWORD = "pw-9f8e7d6c5b"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_certs(folder: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1."""
    ca_key, ca, key, csr, crt = (
        folder / n for n in ("ca.key", "ca.crt", "s.key", "s.csr", "s.crt")
    )
    ext = folder / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
    )
    ssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(key),
        "-out",
        str(csr),
    )
    ssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        str(ext),
        "-out",
        str(crt),
    )
    return ca, crt, key


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def start_redis(port: int, *args: str) -> subprocess.Popen[bytes]:
    """A redis-server listening on ``port`` (plain or TLS, as ``args`` say) once this returns."""
    proc = subprocess.Popen(
        ["redis-server", "--save", "", "--appendonly", "no", "--bind", "127.0.0.1", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: proc.poll() is not None or accepts_connections(port),
            timeout=30,
            what=f"redis-server to listen on port {port}",
        )
    except AssertionError:
        proc.kill()
        proc.wait()
        raise
    assert proc.poll() is None, f"redis-server exited with {proc.returncode}"
    return proc


@pytest.fixture
def private_redis(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A Redis of this test's own: with a password, and over TLS when parametrized so."""
    port = free_port()
    if request.param == "tls":
        ca, crt, key = make_certs(tmp_path)
        proc = start_redis(
            port,
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--tls-cert-file",
            str(crt),
            "--tls-key-file",
            str(key),
            "--tls-ca-cert-file",
            str(ca),
            "--tls-auth-clients",
            "no",
            "--requirepass",
            PASSWORD,
        )
        url = f"rediss://:{PASSWORD}@127.0.0.1:{port}/0?ssl_cert_reqs=required&ssl_ca_certs={ca}"
    else:
        proc = start_redis(port, "--port", str(port), "--requirepass", PASSWORD)
        url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
    yield url
    proc.terminate()
    proc.wait()


@pytest.mark.parametrize("private_redis", ["password", "tls"], indirect=True)
def test_password_and_tls_redis_urls_work(
    private_redis: str, sqlite_url: str, tmp_path: Path
) -> None:
    instances, responses = write_inputs(tmp_path / "in", 10)
    env = cli_env(sqlite_url, private_redis)
    log = tmp_path / "w.log"
    with running_simulator(SimConfig(seed=1)) as sim, workers(env, log=log):
        args = [
            "run",
            "--instances",
            str(instances),
            "--run",
            "secure",
            "--quiet",
            "--judge",
            f"openai/sim@{sim.openai_base_url}",
        ]
        for r in responses:
            args += ["--responses", r]
        proc = flask_eval(*args, env=env)
    assert status(env, "secure")["done"] == 10 * 3 * 2
    for text in (proc.stdout, proc.stderr, log.read_text()):
        assert PASSWORD not in text


def test_wrong_broker_password_is_one_clear_error(sqlite_url: str, tmp_path: Path) -> None:
    port = free_port()
    proc = start_redis(port, "--port", str(port), "--requirepass", PASSWORD)
    try:
        instances, responses = write_inputs(tmp_path / "in", 3)
        env = cli_env(sqlite_url, f"redis://:wrong-pass-123@127.0.0.1:{port}/0")
        result = flask_eval(
            "run",
            "--instances",
            str(instances),
            "--responses",
            responses[0],
            "--judge",
            "openai/x@http://127.0.0.1:9/v1",
            env=env,
            check=False,
        )
    finally:
        proc.terminate()
        proc.wait()
    assert result.returncode == 2
    assert "cannot reach the broker" in result.stderr and "wrong-pass-123" not in result.stderr
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()


def test_sigterm_finishes_in_flight_calls_before_exiting(
    sqlite_url: str, redis_url: str, tmp_path: Path
) -> None:
    instances, responses = write_inputs(tmp_path / "in", 80)
    env = cli_env(sqlite_url, redis_url)
    with running_simulator(SimConfig(latency_ms=1500, seed=5)) as sim:
        args = [
            "run",
            "--instances",
            str(instances),
            "--run",
            "graceful",
            "--no-wait",
            "--judge",
            f"openai/sim@{sim.openai_base_url}",
        ]
        for r in responses:
            args += ["--responses", r]
        flask_eval(*args, env=env)
        with workers(env, in_flight=16, log=tmp_path / "w1.log") as proc:
            # the signal comes while calls are on the wire (each takes 1.5 s)
            wait_until(
                lambda: sim.stats()["in_flight"],
                lambda n: n > 0,
                timeout=120,
                what="calls in flight at the simulator",
            )
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        store = Store(sqlite_url)
        run = store.find_run("graceful")
        assert run is not None
        running = store.count_open(run.id) - len(store.open_rows(run.id))
        assert running == 0, "rows left running: the worker quit with calls in flight"
        assert status(env, "graceful")["done"] > 0
        with workers(env, in_flight=32, log=tmp_path / "w2.log"):
            st = wait_done(env, "graceful")
    assert st["done"] == st["total"] == 80 * 3 * 2


@pytest.mark.parametrize(
    ("visibility", "interval"), [(120.0, 10.0), (12.0, 3.0), (2.0, 1.0), (3600.0, 10.0)]
)
def test_redis_hands_back_a_dead_worker_s_messages_within_a_quarter_timeout(
    visibility: float, interval: float
) -> None:
    """Kombu scans for unacknowledged messages every interval x throttle seconds (10 x 10
    by default); the workers' app scans every quarter of the visibility timeout."""
    from dataclasses import replace

    from flask_eval.core import settings as settings_mod
    from flask_eval.workers.celery_app import make_app

    settings = replace(
        settings_mod.load(), broker_url="redis://127.0.0.1:1/0", visibility_timeout=visibility
    )
    options = make_app(settings).conf.broker_transport_options
    assert options["visibility_timeout"] == visibility
    assert options["unacked_restore_interval"] == interval
    assert options["unacked_restore_throttle"] == 1
