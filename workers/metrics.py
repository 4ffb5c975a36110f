"""Prometheus metrics of a worker process: an observer of the executor's events
(workers/events.py), served on ``/metrics`` by `flask-eval worker --metrics-port`.

Every metric is this process's own (docs/design/events.md): Prometheus sums the
processes (``sum by (judge) (rate(flask_eval_calls_total[5m]))``). docs/operations.md
lists them with alert examples.
"""

from __future__ import annotations

import errno
import socket

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from flask_eval.core.errors import ConfigError
from flask_eval.workers import events

#: judge latency buckets (seconds): a fast local judge to a slow reasoning model
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
#: limiter wait buckets (seconds): most requests do not wait
WAIT_BUCKETS = (0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0)


class Metrics:
    """The metrics of one process, in their own registry (``registry``), fed by
    :meth:`observe`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.judgments = Counter(
            "flask_eval_judgments",
            "Ledger rows ended and written by this process.",
            ["judge", "status", "reason"],
            registry=r,
        )
        self.calls = Counter(
            "flask_eval_calls",
            "Judge calls by outcome: answered (paid request), cache, "
            "batch, or failed_<reason> (a request without an answer, maybe retried).",
            ["judge", "outcome"],
            registry=r,
        )
        self.rate_limited = Counter(
            "flask_eval_rate_limited",
            "429 answers of the judge's endpoint.",
            ["judge"],
            registry=r,
        )
        self.latency = Histogram(
            "flask_eval_judge_latency_seconds",
            "Seconds from a request sent to its answer.",
            ["judge"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "flask_eval_in_flight_calls",
            "Requests sent and not yet answered.",
            ["judge"],
            registry=r,
        )
        self.limiter_wait = Histogram(
            "flask_eval_limiter_wait_seconds",
            "Seconds a request waited for the judge's shared rpm/tpm budget.",
            ["judge"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.batches = Gauge(
            "flask_eval_batches",
            "Provider batches of the judge by state (as the ledger had "
            "them at this process's last batch change).",
            ["judge", "state"],
            registry=r,
        )
        self.cost = Counter(
            "flask_eval_cost_usd",
            "USD spent on answers (at the judges' prices).",
            ["judge"],
            registry=r,
        )
        self.tokens = Counter(
            "flask_eval_tokens",
            "Tokens of the answers: prompt, completion, cached (of prompt).",
            ["judge", "kind"],
            registry=r,
        )

    def observe(self, event: events.Event) -> None:
        if isinstance(event, events.CallStarted):
            self.in_flight.labels(event.judge).inc()
        elif isinstance(event, events.CallAnswered):
            self._answered(event)
        elif isinstance(event, events.CallFailed):
            self.in_flight.labels(event.judge).dec()
            self.calls.labels(event.judge, f"failed_{event.reason}").inc()
        elif isinstance(event, events.JudgmentsWritten):
            for status, reason, n in event.counts:
                self.judgments.labels(event.judge, status, reason).inc(n)
        elif isinstance(event, events.RateLimited):
            self.rate_limited.labels(event.judge).inc()
        elif isinstance(event, events.LimiterWait):
            self.limiter_wait.labels(event.judge).observe(event.seconds)
        elif isinstance(event, events.BatchStateChanged):
            for state, n in event.counts:
                self.batches.labels(event.judge, state).set(n)

    def _answered(self, event: events.CallAnswered) -> None:
        judge = event.judge
        if event.source == "paid":
            self.in_flight.labels(judge).dec()
            self.latency.labels(judge).observe(event.latency_s)
        self.calls.labels(judge, "answered" if event.source == "paid" else event.source).inc()
        if event.cost:
            self.cost.labels(judge).inc(event.cost)
        for kind, n in (
            ("prompt", event.prompt_tokens),
            ("completion", event.completion_tokens),
            ("cached", event.cached_tokens),
        ):
            if n:
                self.tokens.labels(judge, kind).inc(n)


def check_port(host: str, port: int) -> None:
    """ConfigError (one line, exit 2) if ``host:port`` cannot be listened on: checked
    before any worker starts."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        why = "in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise ConfigError(f"--metrics-port: cannot listen on {host}:{port}: {why}") from None


def serve(host: str, port: int) -> Metrics:
    """Serve this process's metrics on ``http://host:port/metrics`` and subscribe them to
    the executor's events."""
    metrics = Metrics()
    try:
        start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(
            f"--metrics-port: cannot listen on {host}:{port}: {exc.strerror}"
        ) from None
    events.subscribe(metrics)
    return metrics
