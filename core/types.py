"""Data objects of the inputs of a run: instances, responses, judges (pure, no I/O).

A judge spec is parsed here for its syntax only (``provider/model[@BASE_URL]``, a base URL
without credentials); whether the provider exists and accepts the spec is the workers'
to say (``workers.judge.check_spec``), since a provider is code.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Collection, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from flask_eval.core.conversations import Turn
from flask_eval.core.errors import ConfigError
from flask_eval.core.images import ImageRef
from flask_eval.core.limits import MAX_JUDGE_SPEC
from flask_eval.core.redact import looks_like_credential, redact, redact_known
from flask_eval.core.text import clip, control_problem

#: a judge's completion budget and temperature unless its configuration says otherwise
DEFAULT_MAX_TOKENS = 1024
DEFAULT_TEMPERATURE = 0.0

#: The state of one judge's judgment of one cell, as the ledger's pivot gives it to the
#: report (``storage.analytics.Pivot`` -> ``report.scores.ScoreTable``).
STATE_NONE = 0  # no judgment, or not finished (pending, running)
STATE_SCORED = 1  # done with a numeric score
STATE_NA = 2  # done, N/A
STATE_FAILED = 3  # failed

#: A pairwise verdict as the ledger stores it (``Judgment.score`` of a row whose
#: ``model_b`` is set): which of the two responses, by the position it was shown in, the
#: judge preferred. The row (model=A, model_b=B) showed A first; the swapped order is the
#: row (model=B, model_b=A). Never 0, so a verdict is never falsy.
VERDICT_FIRST = 1
VERDICT_SECOND = 2
VERDICT_TIE = 3
VERDICTS = (VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE)

#: FLASK's difficulty labels, in order: level 1..5.
DIFFICULTY_LABELS: tuple[str, ...] = (
    "simple lifestyle knowledge",
    "advanced lifestyle knowledge",
    "formal education knowledge",
    "major level knowledge",
    "expert level knowledge",
)

#: FLASK's ten domains.
DOMAINS: tuple[str, ...] = (
    "Humanities",
    "Language",
    "Culture",
    "Health",
    "History",
    "Natural Science",
    "Math",
    "Social Science",
    "Technology",
    "Coding",
)


@dataclass(frozen=True)
class InstanceRubric:
    """A criterion an instance carries for itself (BiGGen Bench's ``score_rubric``, a
    FLASK-Hard checklist for one skill): what is judged and what each score 1-5 means."""

    criteria: str
    scores: Mapping[int, str] = field(hash=False)

    def to_data(self) -> dict[str, Any]:
        return {"criteria": self.criteria, "scores": {str(k): v for k, v in self.scores.items()}}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> InstanceRubric:
        return cls(str(data["criteria"]), {int(k): str(v) for k, v in data["scores"].items()})


@dataclass(frozen=True)
class Instance:
    """One evaluation instance.

    ``skills`` names the criteria it is judged on (FLASK's skills, custom criteria, or an
    instance rubric's name); ``rubrics`` holds the instance's own rubric for any of them
    (used instead of the global criterion of that name). ``domains`` holds only known
    domains (FLASK's ``-1`` is dropped, so the tuple may be empty); ``difficulty`` is a
    level 1-5, or None when unknown. ``system_prompt`` is what the model under test was
    told (shown to the judge); ``capability`` and ``task`` group instances in reports
    (BiGGen Bench).
    """

    id: str
    instruction: str
    answer: str
    skills: tuple[str, ...]
    domains: tuple[str, ...] = ()
    difficulty: int | None = None
    line: int = 0
    system_prompt: str = ""
    rubrics: Mapping[str, InstanceRubric] = field(default_factory=dict, hash=False)
    capability: str | None = None
    task: str | None = None
    #: one turn of a conversation (``core.conversations``): its number (1-based; None: a
    #: one-shot instruction), the conversation's id, and the user's earlier turns
    turn: int | None = None
    conversation: str | None = None
    history: tuple[Turn, ...] = ()
    #: the images the instruction carries, by digest (``core.images``)
    images: tuple[ImageRef, ...] = ()


@dataclass(frozen=True)
class Response:
    """One model's response to one instance (may be empty: empty responses are judged).

    ``history`` holds the model's answers to a conversation's earlier turns (empty for a
    one-shot instruction and for turn 1): ``text`` answers the instance's turn."""

    model: str
    instance_id: str
    text: str
    line: int = 0
    history: tuple[str, ...] = ()


class ResponseSource(Collection[Response]):
    """Responses read from elsewhere when iterated (a file's: ``producer.responses``),
    whose instance ids are known without reading their texts."""

    @abstractmethod
    def instance_ids(self) -> tuple[str, ...]:
        """The ids of the instances answered, in order."""

    @abstractmethod
    def sizes(self) -> Iterator[tuple[str, int]]:
        """Each response's (instance id, length of its text in characters), in order,
        without reading the texts."""

    @abstractmethod
    def texts(self, wanted: Collection[str]) -> dict[str, str]:
        """The texts of the responses to ``wanted`` (instance ids), by instance id."""


@dataclass(frozen=True)
class ResponseSet:
    """All responses of one model, as loaded from one file: held, or (a file's, see
    ``producer.responses.FileResponses``) read again from the file when iterated."""

    model: str
    path: str
    responses: Collection[Response] = field(default_factory=tuple)

    def instance_ids(self) -> tuple[str, ...]:
        """The ids of the instances answered, in order, without reading any text."""
        if isinstance(self.responses, ResponseSource):
            return self.responses.instance_ids()
        return tuple(r.instance_id for r in self.responses)

    def sizes(self) -> Iterator[tuple[str, int]]:
        """Each response's (instance id, length of its text), in order, without reading
        a file's texts (:meth:`ResponseSource.sizes`)."""
        if isinstance(self.responses, ResponseSource):
            return self.responses.sizes()
        return ((r.instance_id, len(r.text)) for r in self.responses)

    def texts(self, wanted: Collection[str]) -> dict[str, str]:
        """The texts of the responses to ``wanted``, by instance id (a file's read again
        for them only)."""
        if isinstance(self.responses, ResponseSource):
            return self.responses.texts(wanted)
        return {r.instance_id: r.text for r in self.responses if r.instance_id in wanted}


_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/+-]{0,199}$")
_PROVIDER_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class JudgeSpec:
    """``provider/model`` or ``provider/model@BASE_URL``.

    ``name`` is the canonical spec (what a worker needs to call the judge);
    ``default_name`` (provider/model) is what reports call a judge that was not named.
    A base URL carries no credential, neither in its userinfo nor in its query string,
    nor anything else a key could hide in (a ``#fragment``, which no server receives; a
    path or query value shaped like a key, or holding a secret variable's value): it is
    stored with the run and printed in reports, so keys belong in the provider's
    environment variable, and such a URL is refused (one line, nothing written).
    """

    provider: str
    model: str
    base_url: str | None = None

    @property
    def name(self) -> str:
        base = f"{self.provider}/{self.model}"
        return f"{base}@{self.base_url}" if self.base_url else base

    @property
    def default_name(self) -> str:
        """``provider/model``: a judge's name unless one is given (no base URL)."""
        return f"{self.provider}/{self.model}"

    @classmethod
    def parse(cls, spec: str) -> JudgeSpec:
        if len(spec) > MAX_JUDGE_SPEC:
            raise ConfigError(
                f"judge spec is longer than {MAX_JUDGE_SPEC} characters: {clip(spec)}"
            )
        text = spec.strip()
        problem = control_problem(text)
        if problem is not None:
            raise ConfigError(f"judge {clip(text)} {problem}")
        head, sep, base_url = text.partition("@")
        provider, slash, model = head.partition("/")
        if not slash or not provider or not model:
            raise ConfigError(
                f"invalid judge {clip(spec)}: expected provider/model[@BASE_URL], "
                "e.g. openai/gpt-5.4 or openai/my-model@http://127.0.0.1:8000/v1"
            )
        if _PROVIDER_RE.fullmatch(provider) is None:
            raise ConfigError(f"invalid provider name {clip(provider)} in judge {clip(spec)}")
        if not _MODEL_RE.match(model):
            raise ConfigError(f"invalid model name {clip(model)} in judge {clip(spec)}")
        if sep:
            return cls(provider, model, cls._base_url(base_url, provider, model))
        return cls(provider, model, None)

    @classmethod
    def _base_url(cls, url: str, provider: str, model: str) -> str:
        """``url`` without a trailing slash, or ConfigError saying what is wrong with it."""
        judge = f"judge {provider}/{model}"
        expected = "expected http(s)://host[:port][/path]"
        if any(char.isspace() for char in url):
            raise ConfigError(f"invalid base URL {clip(url)} of {judge}: it contains a space")
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError as exc:
            what = "an unclosed or invalid [IPv6] address" if "IPv6" in str(exc) else None
            if what is None:
                raise ConfigError(f"invalid port in base URL {clip(url)} of {judge}") from None
            raise ConfigError(
                f"invalid base URL {clip(url)} of {judge}: {what}; {expected}"
            ) from None
        if parts.scheme not in ("http", "https") or not host:
            raise ConfigError(f"invalid base URL {clip(url)} of {judge}: {expected}")
        if port == 0:
            raise ConfigError(f"invalid port in base URL {clip(url)} of {judge}")
        if parts.username or parts.password:
            raise CredentialInUrl(
                provider,
                f"{judge}: credentials in the base URL are not allowed; put the key "
                "in the provider's environment variable",
            )
        for name, _ in parse_qsl(parts.query, keep_blank_values=True):
            if looks_like_credential(name):
                raise CredentialInUrl(
                    provider,
                    f"{judge}: the base URL's query string carries a credential "
                    f"({clip(name)}=...); credentials in the base URL are not allowed: "
                    "put the key in the provider's environment variable",
                )
        if "#" in url:  # never sent to a server, but stored with the run and printed
            raise CredentialInUrl(
                provider,
                f"{judge}: a base URL has no #fragment (no server receives it); "
                "a key goes in the provider's environment variable",
            )
        rest = f"{parts.path}?{parts.query}"  # not the host: a host may be sk-proxy-01
        if redact(rest) != rest or redact_known(url) != url:
            raise CredentialInUrl(
                provider,
                f"{judge}: the base URL carries what looks like a key (an sk-... "
                "token or the value of a secret variable); credentials in the base URL are "
                "not allowed: put the key in the provider's environment variable",
            )
        return url.rstrip("/")


class CredentialInUrl(ConfigError):
    """A judge's base URL carries a credential (``provider`` says whose)."""

    def __init__(self, provider: str, message: str) -> None:
        super().__init__(message)
        self.provider = provider


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens.

    ``input`` is the price of an uncached prompt token; ``cached_input`` of a prompt token
    read from the provider's prompt cache and ``cache_write`` of one written to it (None:
    the ``input`` price); ``batch`` multiplies the whole cost of a call made through the
    provider's batch API (``0.5``: half price; ``1.0``: no discount).
    """

    input: float = 0.0
    output: float = 0.0
    cached_input: float | None = None
    cache_write: float | None = None
    batch: float = 1.0

    def cost(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
        batch: bool = False,
    ) -> float:
        """The cost of one call. ``prompt_tokens`` counts every prompt token, cached and
        cache-written ones included (``cached_tokens`` and ``cache_write_tokens`` are parts
        of it)."""
        cached = min(max(cached_tokens, 0), prompt_tokens)
        written = min(max(cache_write_tokens, 0), prompt_tokens - cached)
        plain = prompt_tokens - cached - written
        read_price = self.input if self.cached_input is None else self.cached_input
        write_price = self.input if self.cache_write is None else self.cache_write
        usd = (
            plain * self.input
            + cached * read_price
            + written * write_price
            + completion_tokens * self.output
        ) / 1_000_000
        return usd * self.batch if batch else usd


#: the most judgments of one item by one judge (``run --samples``)
MAX_SAMPLES = 20
#: between a judge's name and its sample index in the ledger (``J#2``): no judge name may
#: hold it (producer/judges_file.py), so a sample never takes another judge's name
SAMPLE_SEPARATOR = "#"


def sample_name(judge: str, sample: int) -> str:
    """The ledger name of ``judge``'s judgment number ``sample`` (1..K) of an item."""
    return f"{judge}{SAMPLE_SEPARATOR}{sample}"


def sample_of(name: str) -> tuple[str, int] | None:
    """``(judge, sample)`` of a sample's ledger name, None for any other name."""
    judge, sep, index = name.rpartition(SAMPLE_SEPARATOR)
    if not sep or not judge or not index.isdigit() or not 1 <= int(index) <= MAX_SAMPLES:
        return None
    return judge, int(index)


@dataclass(frozen=True)
class JudgeConfig:
    """``name`` identifies the judge in the ledger and reports; ``spec`` says how to call it."""

    name: str
    spec: str
    rpm: float | None = None
    tpm: float | None = None
    max_in_flight: int | None = None
    #: USD per million tokens (None: no price given and none known; such a judge's cost
    #: is unknown, never taken as free: see producer/prices.py)
    price: Price | None = None
    #: completion budget per call (None: the default, ``DEFAULT_MAX_TOKENS``)
    max_tokens: int | None = None
    #: sampling temperature (None: ours, 0.0, where the provider's SDK takes one)
    temperature: float | None = None
    #: a larger completion budget for one more try after an answer was cut off by
    #: ``max_tokens`` (None: a cut-off answer fails with reason ``truncated``)
    retry_max_tokens: int | None = None
    #: the grading protocol this judge is asked in (None: ours, ``flask-eval``)
    protocol: str | None = None
    #: ask for a JSON object that follows the protocol's schema (structured outputs)
    structured: bool = False
    #: send this judge's calls through its provider's batch API (half the price, answers
    #: within hours; docs/design/batches.md), not one by one
    batch: bool = False
    #: seconds a parked call waits for others before its batch is submitted (None: 60)
    batch_max_wait: float | None = None
    #: the most calls in one batch (None: the provider's limit)
    batch_max_size: int | None = None
    #: the most estimated prompt tokens in this judge's open batches (None: no limit)
    batch_max_tokens: int | None = None
    #: which of a judge's repeated judgments this is (``run --samples K``: 2..K; None or
    #: 1: the first, whose calls keep the cache key a single judgment always had)
    sample: int | None = None

    def cost(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
        batch: bool = False,
    ) -> float:
        """The cost of a call at this judge's price (0 without a price: unknown); see
        :meth:`Price.cost`."""
        if self.price is None:
            return 0.0
        return self.price.cost(
            prompt_tokens,
            completion_tokens,
            cached_tokens=cached_tokens,
            cache_write_tokens=cache_write_tokens,
            batch=batch,
        )

    def to_data(self) -> dict[str, Any]:
        """The stored form; ``sample`` only when a later sample, so that the configs of
        runs without repeated judgments read exactly as before it existed."""
        data = asdict(self)
        if (self.sample or 1) <= 1:
            del data["sample"]
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> JudgeConfig:
        stored = data.get("price")
        return cls(**{**data, "price": None if stored is None else Price(**stored)})
