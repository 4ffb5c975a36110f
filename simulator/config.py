"""Configuration of the judge simulator (pure, no I/O)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .traits import (
    NEUTRAL,
    TRAIT_KEYS,
    JudgeTraits,
    check_family,
    parse_judge_traits,
    parse_model_families,
)

__all__ = [
    "NEUTRAL",
    "TRAIT_KEYS",
    "JudgeTraits",
    "SimConfig",
    "parse_generators",
    "parse_judge_traits",
    "parse_model_families",
    "parse_skill_levels",
]

LATENCY_DISTS = ("fixed", "lognormal")
ANSWER_FORMATS = ("auto", "result")
#: HTTP 200 bodies that are JSON but not a message (``SimConfig.malformed``)
MALFORMED = ("list", "null_content")
#: ``SimConfig.stop_reason`` that sends JSON null as the stop reason
NULL_REASON = "null"
#: prefix hashes the prompt caches keep by default (16 bytes each, ~100 with the table's
#: overhead: ~10 MB)
CACHE_PREFIXES = 100_000
#: the default length of a simulated model's generated answer, in tokens
GENERATION_TOKENS = 120
#: the ``SimConfig.judges`` key whose traits apply to every judge not named
ANY_JUDGE = "*"
#: the verdicts ``SimConfig.replay`` holds: the response shown first, second, or a tie
REPLAY_VERDICTS = ("A", "B", "tie")
#: characters a criterion named in ``SimConfig.skill_levels`` cannot hold (a generated
#: response's signature lists them)
_CRITERION_FORBIDDEN = frozenset(";()\n\r:")


@dataclass(frozen=True)
class SimConfig:
    """How the simulated judge behaves.

    Rates are probabilities in ``[0, 1]`` drawn independently per request, in the order
    rate limit → server error → timeout; ``garbage_rate`` applies to answers actually sent.

    - ``latency_ms``: fixed latency, or the median of a lognormal (sigma 0.5) when
      ``latency_dist == "lognormal"``.
    - ``rate_limit_wait``: the wait a random 429 (``rate_limit_rate``) asks for, in
      seconds (``Retry-After`` rounds it up to whole seconds, ``retry-after-ms`` does not).
    - ``rpm`` / ``tpm``: sliding 60 s window limits (requests, estimated prompt tokens);
      requests over the limit get a 429 with ``Retry-After``.
    - ``score``: when set (1..5), every requested skill gets that score.
    - ``na_rate``: probability that a skill is scored "N/A" (ignored when ``score`` is set).
    - ``seed``: seeds both the answer hashes and the per-app random generator.
    - ``sigma``: the spread of the lognormal latency (its log's standard deviation).
    - ``quote_response``: the judge quotes the response verbatim at the end of its rationale
      (so a response that ends in a scores line puts that line near the answer's end).
    - ``min_max_tokens``: a request asking for fewer completion tokens than this gets an
      answer cut off by its token limit (OpenAI ``finish_reason: length``, Anthropic
      ``stop_reason: max_tokens``), right after the quoted response when there is one.
    - ``refusal_rate``: share of answers that are refusals (OpenAI ``content: null`` with a
      ``refusal`` text; Anthropic ``stop_reason: refusal``).
    - ``html_rate``: share of requests answered HTTP 200 with an HTML page (a proxy's).
    - ``require_key``: answer 401 unless the request carries this API key.
    - ``answer_format``: ``auto`` answers each prompt in the format it asks for;
      ``result`` always answers ``Feedback: ... [RESULT] N`` (an evaluator LM trained on
      Prometheus's format, whatever it is asked).
    - ``position_bias``: probability that a pairwise judgment picks the response shown
      FIRST regardless of quality (drawn per prompt and criterion from a hash, so
      deterministic); otherwise the better response wins (``simulator.pairwise``).
    - ``echo_headers``: every answer begins with the request's headers (the API key
      among them), as a debugging proxy may echo them.
    - ``stop_reason``: the wire value of why every answer that is not cut off or refused
      stopped (OpenAI ``finish_reason``, Anthropic ``stop_reason``, Gemini
      ``finishReason``), e.g. ``pause_turn``; ``"null"`` sends JSON null.
    - ``malformed``: every answer is an HTTP 200 whose JSON is not a message: ``list``
      (the message inside a list) or ``null_content`` (its content null).
    - ``slots``: requests served at once, as a local server with that many slots; the
      others wait in line (first come, first served) before their latency starts, and a
      request whose client gave up leaves the line (or frees its slot).
    - ``cache_prefixes``: prompt prefixes the simulated prompt caches remember (the most
      recently used; simulator/prompt_cache.py); 0 turns prompt caching off.
    - ``generators``: the models under test, by name, with their quality level (1 to 5,
      fractions allowed): every request to one of them is answered with a generated
      response (simulator/generate.py) whose level the simulated judges read back.
    - ``skill_levels``: per model under test, a level (1 to 5, fractions allowed) per
      criterion that replaces the model's level on that criterion only, e.g.
      ``{"model-b": {"logical_correctness": 3.3}}`` (a drop on one skill of one model);
      the generated response's signature carries it and judges score that criterion from
      it. Every model named must be in ``generators``; a criterion's name cannot hold
      ``;``, ``:`` or parentheses.
    - ``judges``: per judge model (the name a request asks for; ``"*"``: every judge not
      named) its :class:`JudgeTraits`: bias, Gaussian noise, preference for long
      responses, position bias in comparisons, credulity to injections, preference for
      its own family's responses, e.g. ``{"sim-biased": JudgeTraits(bias=0.5,
      noise=0.7)}``. Without any, judges score as they always have.
    - ``model_families``: per model under test, the name of its family (a vendor's,
      ``acme``): its generated responses sign it (``simulator.generate``), and a judge
      whose traits name the same ``family`` adds its ``self_preference`` to their scores.
    - ``generation_tokens``: about how long a generated response is, in tokens.
    - ``usage``: fields set in every answer's usage object, by the wire's own names
      (OpenAI and Anthropic ``usage``, Gemini ``usageMetadata``), e.g.
      ``{"promptTokenCount": -1000000000}``: a provider whose usage cannot be trusted.
    - ``request_seed``: not a server option but the seed one request carries (OpenAI's
      ``seed``, Gemini's ``generationConfig.seed``; ``reply`` sets it per request): mixed
      into the per-skill nudges and N/A draws, so a repeated judgment's later samples
      (``run --samples``) may differ from the first while the response's level does not.
    - ``replay``: recorded pairwise verdicts, ``"A"``, ``"B"`` or ``"tie"``, keyed on the
      responses a comparison shows in the order shown
      (:func:`simulator.pairwise.replay_key`): a comparison found there gets that verdict
      on every criterion, whatever the judge's traits (a judge replaying another's
      recorded answers).
    """

    latency_ms: float = 0
    latency_dist: str = "fixed"
    error_rate: float = 0
    garbage_rate: float = 0
    rate_limit_rate: float = 0
    rate_limit_wait: float = 1.0
    timeout_rate: float = 0
    rpm: int | None = None
    tpm: int | None = None
    score: int | None = None
    seed: int = 0
    na_rate: float = 0
    sigma: float = 0.5
    quote_response: bool = False
    min_max_tokens: int | None = None
    refusal_rate: float = 0
    html_rate: float = 0
    require_key: str | None = None
    answer_format: str = "auto"
    position_bias: float = 0
    echo_headers: bool = False
    stop_reason: str | None = None
    malformed: str | None = None
    slots: int | None = None
    cache_prefixes: int = CACHE_PREFIXES
    generators: Mapping[str, float] = field(default_factory=dict, hash=False)
    generation_tokens: int = GENERATION_TOKENS
    skill_levels: Mapping[str, Mapping[str, float]] = field(default_factory=dict, hash=False)
    judges: Mapping[str, JudgeTraits] = field(default_factory=dict, hash=False)
    model_families: Mapping[str, str] = field(default_factory=dict, hash=False)
    request_seed: int | None = None
    usage: Mapping[str, Any] = field(default_factory=dict, hash=False)
    replay: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, got {self.latency_ms}")
        if self.latency_dist not in LATENCY_DISTS:
            raise ValueError(
                f"latency_dist must be one of {LATENCY_DISTS}, got {self.latency_dist!r}"
            )
        if self.answer_format not in ANSWER_FORMATS:
            raise ValueError(
                f"answer_format must be one of {ANSWER_FORMATS}, got {self.answer_format!r}"
            )
        if self.malformed is not None and self.malformed not in MALFORMED:
            raise ValueError(
                f"malformed must be one of {MALFORMED} or None, got {self.malformed!r}"
            )
        if not 0 < self.rate_limit_wait <= 3600:
            raise ValueError(f"rate_limit_wait must be in (0, 3600], got {self.rate_limit_wait}")
        if self.cache_prefixes < 0:
            raise ValueError(f"cache_prefixes must be >= 0, got {self.cache_prefixes}")
        if self.slots is not None and self.slots < 1:
            raise ValueError(f"slots must be >= 1 or None, got {self.slots}")
        if not 0 <= self.sigma <= 5:
            raise ValueError(f"sigma must be in [0, 5], got {self.sigma}")
        if self.min_max_tokens is not None and self.min_max_tokens < 1:
            raise ValueError(f"min_max_tokens must be >= 1 or None, got {self.min_max_tokens}")
        for name in (
            "error_rate",
            "garbage_rate",
            "rate_limit_rate",
            "timeout_rate",
            "na_rate",
            "refusal_rate",
            "html_rate",
            "position_bias",
        ):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        if self.score is not None and not 1 <= self.score <= 5:
            raise ValueError(f"score must be in 1..5 or None, got {self.score}")
        if not 1 <= self.generation_tokens <= 100_000:
            raise ValueError(
                f"generation_tokens must be in 1..100000, got {self.generation_tokens}"
            )
        for name, level in self.generators.items():
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"a generator's name must be a non-empty string, got {name!r}")
            if isinstance(level, bool) or not isinstance(level, int | float):
                raise ValueError(f"generator {name!r}: level must be a number, got {level!r}")
            if not (math.isfinite(level) and 1 <= level <= 5):
                raise ValueError(f"generator {name!r}: level must be in [1, 5], got {level}")
        # read-only, so that a config shared by the server's handlers cannot drift
        object.__setattr__(self, "generators", MappingProxyType(dict(self.generators)))
        self._check_skill_levels()
        self._check_judges()
        self._check_families()
        if not isinstance(self.usage, Mapping):
            raise ValueError(f"usage must be a JSON object, got {self.usage!r}")
        object.__setattr__(self, "usage", MappingProxyType(dict(self.usage)))
        self._check_replay()

    def _check_skill_levels(self) -> None:
        if not isinstance(self.skill_levels, Mapping):
            raise ValueError(f"skill_levels must be a mapping, got {self.skill_levels!r}")
        frozen: dict[str, Mapping[str, float]] = {}
        for model, levels in self.skill_levels.items():
            if model not in self.generators:
                raise ValueError(
                    f"skill_levels: model {model!r} is not a model under test (generators)"
                )
            if not isinstance(levels, Mapping):
                raise ValueError(f"skill_levels[{model!r}] must be a mapping of criteria")
            for criterion, level in levels.items():
                if (
                    not isinstance(criterion, str)
                    or not criterion.strip()
                    or criterion != criterion.strip()
                    or _CRITERION_FORBIDDEN & set(criterion)
                ):
                    raise ValueError(
                        f"skill_levels[{model!r}]: a criterion must be a non-empty name "
                        f"without ';', ':', parentheses or outer spaces, got {criterion!r}"
                    )
                if isinstance(level, bool) or not isinstance(level, int | float):
                    raise ValueError(
                        f"skill_levels[{model!r}][{criterion!r}]: level must be a number, "
                        f"got {level!r}"
                    )
                if not (math.isfinite(level) and 1 <= level <= 5):
                    raise ValueError(
                        f"skill_levels[{model!r}][{criterion!r}]: level must be in [1, 5], "
                        f"got {level}"
                    )
            frozen[model] = MappingProxyType(dict(levels))
        object.__setattr__(self, "skill_levels", MappingProxyType(frozen))

    def _check_judges(self) -> None:
        if not isinstance(self.judges, Mapping):
            raise ValueError(f"judges must be a mapping, got {self.judges!r}")
        for name, traits in self.judges.items():
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"a judge's name must be a non-empty string, got {name!r}")
            if not isinstance(traits, JudgeTraits):
                raise ValueError(f"judges[{name!r}] must be JudgeTraits, got {traits!r}")
        object.__setattr__(self, "judges", MappingProxyType(dict(self.judges)))

    def _check_families(self) -> None:
        if not isinstance(self.model_families, Mapping):
            raise ValueError(f"model_families must be a mapping, got {self.model_families!r}")
        for model, family in self.model_families.items():
            if model not in self.generators:
                raise ValueError(
                    f"model_families: model {model!r} is not a model under test (generators)"
                )
            check_family(family, f"model_families[{model!r}]")
        object.__setattr__(self, "model_families", MappingProxyType(dict(self.model_families)))

    def _check_replay(self) -> None:
        if not isinstance(self.replay, Mapping):
            raise ValueError(f"replay must be a mapping, got {self.replay!r}")
        for key, verdict in self.replay.items():
            if verdict not in REPLAY_VERDICTS:
                raise ValueError(
                    f"replay[{key!r}] must be one of {REPLAY_VERDICTS}, got {verdict!r}"
                )
        object.__setattr__(self, "replay", MappingProxyType(dict(self.replay)))

    def traits_of(self, judge: str) -> JudgeTraits:
        """The traits of the judge model ``judge``: its own, else those of ``"*"``, else
        none (:data:`NEUTRAL`)."""
        found = self.judges.get(judge)
        if found is None:
            found = self.judges.get(ANY_JUDGE, NEUTRAL)
        return found


def parse_generators(specs: Iterable[str]) -> dict[str, float]:
    """``NAME=LEVEL`` specifications (``--generator``) as ``SimConfig.generators``;
    ValueError naming the first one that is not such (a name given twice included). The
    name is everything before the last ``=``, so a name may hold one."""
    generators: dict[str, float] = {}
    for spec in specs:
        name, sep, level = spec.rpartition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"expected NAME=LEVEL, got {spec!r}")
        try:
            value = float(level)
        except ValueError:
            raise ValueError(f"{spec!r}: the level must be a number from 1 to 5") from None
        if name in generators:
            raise ValueError(f"generator {name!r} is given twice")
        generators[name] = value
    return generators


def parse_skill_levels(specs: Iterable[str]) -> dict[str, dict[str, float]]:
    """``MODEL:CRITERION=LEVEL`` specifications (``--skill-level``) as
    ``SimConfig.skill_levels``; ValueError naming the first one that is not such (a
    criterion given twice for a model included). The criterion is what follows the last
    ``:`` before the last ``=``, so a model's name may hold a ``:``."""
    levels: dict[str, dict[str, float]] = {}
    for spec in specs:
        head, sep, level = spec.rpartition("=")
        model, colon, criterion = head.rpartition(":")
        model, criterion = model.strip(), criterion.strip()
        if not sep or not colon or not model or not criterion:
            raise ValueError(f"expected MODEL:CRITERION=LEVEL, got {spec!r}")
        try:
            value = float(level)
        except ValueError:
            raise ValueError(f"{spec!r}: the level must be a number from 1 to 5") from None
        per_model = levels.setdefault(model, {})
        if criterion in per_model:
            raise ValueError(f"{model!r}'s {criterion!r} is given twice")
        per_model[criterion] = value
    return levels
