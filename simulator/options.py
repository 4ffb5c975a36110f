"""The simulator's command-line options, defined once: `flask-eval simulate` (click) and
``python -m flask_eval.simulator`` (argparse) are both built from :data:`OPTIONS`, and
their descriptions from :data:`WIRE_FORMATS`, the formats ``simulator.server`` serves.
Light: importing it imports no server code (the command line starts fast)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .config import (
    ANSWER_FORMATS,
    CACHE_PREFIXES,
    GENERATION_TOKENS,
    LATENCY_DISTS,
    MALFORMED,
    SimConfig,
    parse_generators,
    parse_judge_traits,
    parse_model_families,
    parse_skill_levels,
)

#: the wire formats the simulator serves, as their providers name them, in the order
#: ``simulator.server.make_app`` routes them
WIRE_FORMATS = (
    "OpenAI chat completions",
    "Anthropic messages",
    "Gemini generateContent",
    "Anthropic message batches",
    "Gemini batches",
    "OpenAI batches",
)


def description() -> str:
    """What the simulator is, naming every wire format it serves."""
    return (
        f"A judge and model simulator speaking {len(WIRE_FORMATS)} wire formats: "
        f"{', '.join(WIRE_FORMATS)} (no real model)."
    )


@dataclass(frozen=True)
class Option:
    """One option: ``--name`` sets ``SimConfig.<dest>`` (or the server's host and port)."""

    name: str
    help: str
    default: Any = None
    type: type = str
    choices: tuple[str, ...] | None = None
    flag: bool = False  # takes no value
    repeat: bool = False  # may be given again (a list)
    metavar: str | None = None
    low: int | None = None  # the smallest value (integers)
    high: int | None = None  # the largest value (integers)

    @property
    def dest(self) -> str:
        return self.name.removeprefix("--").replace("-", "_")


OPTIONS: tuple[Option, ...] = (
    Option("--host", "Address to listen on.", "127.0.0.1"),
    Option("--port", "Port (0: any free port).", 8765, int),
    Option("--latency-ms", "Latency of an answer (ms).", 0.0, float),
    Option(
        "--latency-dist",
        "Fixed latency, or log-normal with --latency-ms as its median.",
        "fixed",
        choices=LATENCY_DISTS,
    ),
    Option("--sigma", "Spread of the log-normal latency.", 0.5, float),
    Option("--error-rate", "Share of 5xx answers.", 0.0, float),
    Option("--garbage-rate", "Share of malformed answers.", 0.0, float),
    Option("--rate-limit-rate", "Share of 429 answers.", 0.0, float),
    Option("--timeout-rate", "Share of requests that hang.", 0.0, float),
    Option("--rpm", "Requests per minute before 429s.", None, int),
    Option("--tpm", "Prompt tokens per minute before 429s.", None, int),
    Option("--score", "Give every score this.", None, int, low=1, high=5),
    Option("--na-rate", "Share of skills scored N/A.", 0.0, float),
    Option("--refusal-rate", "Share of refusals.", 0.0, float),
    Option("--html-rate", "Share of HTML error pages.", 0.0, float),
    Option("--quote-response", "Judges quote the response they judge.", False, flag=True),
    Option(
        "--position-bias",
        "Share of pairwise judgments that pick the response shown first, whatever it says.",
        0.0,
        float,
    ),
    Option(
        "--min-max-tokens",
        "Cut off answers to requests allowing fewer completion tokens than this.",
        None,
        int,
    ),
    Option("--require-key", "Answer 401 to requests without this key."),
    Option(
        "--answer-format",
        "auto: answer each prompt in the format it asks for; result: "
        "always 'Feedback: ... [RESULT] N'.",
        "auto",
        choices=ANSWER_FORMATS,
    ),
    Option("--echo-headers", "Answers begin with the request's headers.", False, flag=True),
    Option("--stop-reason", "The wire stop reason of whole answers."),
    Option("--malformed", "Every answer a 200 that is no message.", choices=MALFORMED),
    Option("--slots", "Requests served at once (the rest queue).", None, int),
    Option(
        "--cache-prefixes",
        "Prompt prefixes the simulated prompt caches keep (0: no caching).",
        CACHE_PREFIXES,
        int,
    ),
    Option(
        "--generator",
        "A model under test answering at quality LEVEL (1-5, fractions allowed); repeat per model.",
        (),
        repeat=True,
        metavar="NAME=LEVEL",
    ),
    Option(
        "--skill-level",
        "A model under test's own level (1-5) on one criterion, instead of its --generator "
        "level; repeat per model and criterion.",
        (),
        repeat=True,
        metavar="MODEL:CRITERION=LEVEL",
    ),
    Option(
        "--judge-traits",
        "A judge model's bias (points added), noise (standard deviation), length "
        "preference (points per doubling of a response's words past 100), position bias "
        "(-1..1: share of comparisons given to the first shown, negative: the second), "
        "credulity to injections (0..1), self-preference (points added to its family's "
        "responses) and family, each optional; NAME '*' for every judge not named; "
        "repeat per judge.",
        (),
        repeat=True,
        metavar="NAME:bias=B,noise=S,length=P,position=B,inject=Q,self=S,family=F",
    ),
    Option(
        "--model-family",
        "The family of a model under test (its responses sign it; a judge of that "
        "family prefers them by its self-preference); repeat per model.",
        (),
        repeat=True,
        metavar="MODEL=FAMILY",
    ),
    Option(
        "--generation-tokens",
        "About how long a generated answer is (tokens).",
        GENERATION_TOKENS,
        int,
    ),
    Option(
        "--usage",
        "Fields set in every answer's usage, by the wire's own names (a provider whose "
        "usage cannot be trusted), e.g. '{\"promptTokenCount\": -1000000000}'.",
        metavar="JSON",
    ),
    Option("--seed", "Seed of the answers and faults.", 0, int),
)

#: the options that are the server's, not the simulated APIs'
SERVER = ("host", "port")


def config_of(values: Mapping[str, Any]) -> SimConfig:
    """The simulator's configuration from the options' values (by ``dest``); ValueError
    naming what is wrong."""
    kwargs = {o.dest: values[o.dest] for o in OPTIONS if o.dest not in SERVER}
    kwargs["generators"] = parse_generators(kwargs.pop("generator") or ())
    kwargs["skill_levels"] = parse_skill_levels(kwargs.pop("skill_level") or ())
    kwargs["judges"] = parse_judge_traits(kwargs.pop("judge_traits") or ())
    kwargs["model_families"] = parse_model_families(kwargs.pop("model_family") or ())
    kwargs["usage"] = json.loads(kwargs["usage"]) if kwargs["usage"] else {}
    return SimConfig(**kwargs)
