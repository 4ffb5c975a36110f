"""``python -m flask_eval.simulator --port 8765 --latency-ms 200 ...``"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from .config import (
    CACHE_PREFIXES,
    GENERATION_TOKENS,
    LATENCY_DISTS,
    MALFORMED,
    SimConfig,
    parse_generators,
)
from .server import run


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m flask_eval.simulator",
        description="Judge simulator speaking the OpenAI and Anthropic wire formats.",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--latency-dist", choices=LATENCY_DISTS, default="fixed")
    p.add_argument("--error-rate", type=float, default=0.0)
    p.add_argument("--garbage-rate", type=float, default=0.0)
    p.add_argument("--rate-limit-rate", type=float, default=0.0)
    p.add_argument("--timeout-rate", type=float, default=0.0)
    p.add_argument("--na-rate", type=float, default=0.0)
    p.add_argument("--sigma", type=float, default=0.5, help="lognormal latency spread")
    p.add_argument("--quote-response", action="store_true", help="judges quote the response")
    p.add_argument("--min-max-tokens", type=int, default=None, help="cut answers below this")
    p.add_argument("--refusal-rate", type=float, default=0.0)
    p.add_argument("--html-rate", type=float, default=0.0)
    p.add_argument("--require-key", default=None, help="answer 401 without this API key")
    p.add_argument("--answer-format", choices=("auto", "result"), default="auto")
    p.add_argument(
        "--position-bias",
        type=float,
        default=0.0,
        help="share of pairwise judgments that pick the first response regardless",
    )
    p.add_argument("--echo-headers", action="store_true", help="answers echo the request headers")
    p.add_argument("--stop-reason", default=None, help="the wire stop reason of whole answers")
    p.add_argument("--malformed", choices=MALFORMED, default=None, help="200s that are no message")
    p.add_argument("--slots", type=int, default=None, help="requests served at once (a queue)")
    p.add_argument(
        "--cache-prefixes",
        type=int,
        default=CACHE_PREFIXES,
        help="prompt prefixes the simulated prompt caches keep (0: no caching)",
    )
    p.add_argument(
        "--generator",
        action="append",
        default=[],
        metavar="NAME=LEVEL",
        help="a model under test answering at quality LEVEL (1-5, fractions allowed); repeatable",
    )
    p.add_argument(
        "--generation-tokens",
        type=int,
        default=GENERATION_TOKENS,
        help="about how long a generated answer is (tokens)",
    )
    p.add_argument(
        "--usage",
        type=json.loads,
        default={},
        metavar="JSON",
        help="fields set in every answer's usage, e.g. '{\"promptTokenCount\": -1000000000}'",
    )
    p.add_argument("--rpm", type=int, default=None)
    p.add_argument("--tpm", type=int, default=None)
    p.add_argument("--score", type=int, default=None, help="give every skill this score")
    p.add_argument("--seed", type=int, default=0)
    return p


def config_from_args(args: argparse.Namespace) -> SimConfig:
    return SimConfig(
        latency_ms=args.latency_ms,
        latency_dist=args.latency_dist,
        error_rate=args.error_rate,
        garbage_rate=args.garbage_rate,
        rate_limit_rate=args.rate_limit_rate,
        timeout_rate=args.timeout_rate,
        rpm=args.rpm,
        tpm=args.tpm,
        score=args.score,
        seed=args.seed,
        na_rate=args.na_rate,
        sigma=args.sigma,
        quote_response=args.quote_response,
        min_max_tokens=args.min_max_tokens,
        refusal_rate=args.refusal_rate,
        html_rate=args.html_rate,
        require_key=args.require_key,
        answer_format=args.answer_format,
        position_bias=args.position_bias,
        echo_headers=args.echo_headers,
        stop_reason=args.stop_reason,
        malformed=args.malformed,
        slots=args.slots,
        cache_prefixes=args.cache_prefixes,
        generators=parse_generators(args.generator),
        generation_tokens=args.generation_tokens,
        usage=args.usage,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    run(config, args.host, args.port)


if __name__ == "__main__":
    main()
