"""A run's spec: what `flask-eval run` runs, typed, built once from the command line, the
Python API or a YAML file, validated once by one decoder (:func:`RunSpec.from_data`).

A spec names its inputs (paths as given, relative to the working directory), its
judges, how they are asked (protocol mode, pairwise comparison), which instances
(sampling), the run's budget and how its calls are made (options). ``to_data()`` leaves
out what is at its default; ``from_data(to_data())`` gives the spec back.
docs/design/run-spec.md describes the shape and its versions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import yaml

from flask_eval.core import strict_yaml
from flask_eval.core.errors import InputError
from flask_eval.core.files import read_text
from flask_eval.core.text import clip

#: the version of the spec's shape this release writes and reads
SPEC_VERSION = 1
#: the kinds of run a spec may name (`run` judges; the other kinds have their commands)
SPEC_KINDS = ("judgment",)
MODES = ("instance", "skill")
#: a spec file is a few lines; anything far larger is not one
MAX_SPEC_BYTES = 1 << 20


T = TypeVar("T")


class SpecError(InputError):
    """A spec that does not decode; ``key`` is the dotted path of the key at fault."""

    def __init__(self, message: str, key: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Workers:
    """Who does the work: the judges (``--judge [NAME=]SPEC``, ``--judges FILE``), people
    among them (``human/...``), and the order of people's queues (``--human-first``:
    ``random``, or ``disagreement``: the items the judges disagree on most first)."""

    judges: tuple[str, ...] = ()
    judges_files: tuple[str, ...] = ()
    human_first: str = "random"


@dataclass(frozen=True)
class SpecInputs:
    """What is judged: one source of instances and responses, and the criteria."""

    instances: str | None = None
    #: a model's responses as ``NAME=PATH`` (``--responses``), in the order given
    responses: tuple[str, ...] = ()
    #: the names of the models a data set file carries (``--model``)
    models: tuple[str, ...] = ()
    biggen: str | None = None
    biggen_llm_judge: bool = False
    #: a Multifaceted Bench file (Janus): instances with several rubrics each
    multifaceted: str | None = None
    prometheus_set: str | None = None
    pairwise_set: str | None = None
    rubrics: str | None = None
    criteria: str | None = None
    #: judges see the reference answers (``--no-reference``: False)
    reference: bool = True
    #: conversations' reference answers by question_id (``--reference-answers``:
    #: FastChat's model_answer JSON Lines, e.g. MT-Bench's ``reference_answer/gpt-4.jsonl``)
    reference_answers: str | None = None
    #: a Perception-Bench file (Prometheus-Vision): an image, an instruction and its rubric
    perception_bench: str | None = None
    #: image URLs are fetched (``--fetch-images``), only from these hosts (``--image-hosts``)
    fetch_images: bool = False
    image_hosts: tuple[str, ...] = ()
    #: the largest image read, in MB of 2**20 bytes (None: ``producer.images``' default)
    max_image_mb: float | None = None


@dataclass(frozen=True)
class Protocol:
    """How a judge is asked: one call per instance (all its criteria) or per criterion."""

    mode: str = "instance"


@dataclass(frozen=True)
class Pairwise:
    """Comparing responses two by two: ``against`` is ``all`` or ``baseline:NAME`` (None:
    absolute grading)."""

    against: str | None = None
    swap: bool = True
    per_criterion: bool = False


@dataclass(frozen=True)
class Sampling:
    """Which instances (the first ``limit``, or ``sample`` drawn with ``seed``) and how
    many times each judge is asked per item (``samples``)."""

    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    samples: int = 1


@dataclass(frozen=True)
class Budget:
    """The run's budget in USD (None: none)."""

    max_cost: float | None = None


@dataclass(frozen=True)
class Options:
    """How the calls are made: calls in flight (in-process), failures judged again."""

    in_flight: int = 64
    retry_failed: bool = False


@dataclass(frozen=True)
class Probing:
    """Judge probes (``core.probes``, docs/design/probes.md): the probes to run (``length``,
    ``style``, ``order``, ``inject``, ``swap``, ``self``; none: an ordinary run) and the
    declared families of models and judges, as ``NAME=FAMILY`` (for ``self``)."""

    probes: tuple[str, ...] = ()
    families: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunSpec:
    """Everything `flask-eval run` is given; :meth:`from_data` is its one decoder."""

    kind: str = "judgment"
    #: the run's name (None: ``run-`` and the start of its fingerprint)
    name: str | None = None
    workers: Workers = field(default_factory=Workers)
    inputs: SpecInputs = field(default_factory=SpecInputs)
    protocol: Protocol = field(default_factory=Protocol)
    pairwise: Pairwise = field(default_factory=Pairwise)
    sampling: Sampling = field(default_factory=Sampling)
    budget: Budget = field(default_factory=Budget)
    options: Options = field(default_factory=Options)
    probing: Probing = field(default_factory=Probing)
    version: int = SPEC_VERSION

    def to_data(self) -> dict[str, Any]:
        """The spec as plain data (YAML's): ``version`` and ``kind`` always, the rest
        when not at its default."""
        data: dict[str, Any] = {"version": self.version, "kind": self.kind}
        if self.name is not None:
            data["name"] = self.name
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, _SECTIONS_T):
                continue
            section = {
                g.name: list(v) if isinstance(v, tuple) else v
                for g in fields(value)
                if (v := getattr(value, g.name)) != g.default
            }
            if section:
                data[f.name] = section
        return data

    @classmethod
    def from_data(cls, data: object) -> RunSpec:
        """The spec of plain data, validated: SpecError naming the key at fault for an
        unknown key, a value of the wrong type or out of range."""
        top = _mapping(data, ())
        _known(top, {f.name for f in fields(cls)}, ())
        version = top.get("version", SPEC_VERSION)
        if type(version) is not int or not 1 <= version <= SPEC_VERSION:
            raise SpecError(
                f"version: {clip(version)} is not a spec version this flask-eval reads "
                f"(1 to {SPEC_VERSION})",
                ("version",),
            )
        kind = top.get("kind", "judgment")
        if kind not in SPEC_KINDS:
            raise SpecError(
                f"kind: {clip(kind)}; `flask-eval run` runs {', '.join(SPEC_KINDS)}", ("kind",)
            )
        name = top.get("name")
        if name is not None and not isinstance(name, str):
            raise SpecError(f"name: expected text, got {clip(name)}", ("name",))
        sections: dict[str, Any] = {
            f.name: decode_section(_SECTIONS[f.name], top.get(f.name), (f.name,))
            for f in fields(cls)
            if f.name in _SECTIONS
        }
        spec = cls(kind=kind, name=name, version=version, **sections)
        _check(spec)
        return spec

    @classmethod
    def from_flat(cls, values: Mapping[str, Any]) -> RunSpec:
        """The spec of the command line's and the Python API's flat names (``judges``,
        ``instances``, ``mode``, ``limit``, ``max_cost``, ``run_name``, ...), through
        :meth:`from_data`; an unknown name is refused."""
        data: dict[str, Any] = {}
        for key, value in values.items():
            where = FLAT.get(key)
            if where is None:
                raise SpecError(f"unknown option {key!r}", (key,))
            if value is None or value == ():
                continue
            section, name = where
            if section is None:
                data[name] = value
            else:
                data.setdefault(section, {})[name] = list(value) if _seq(value) else value
        return cls.from_data(data)


_SECTIONS: dict[str, type[Any]] = {
    "workers": Workers,
    "inputs": SpecInputs,
    "protocol": Protocol,
    "pairwise": Pairwise,
    "sampling": Sampling,
    "budget": Budget,
    "options": Options,
    "probing": Probing,
}
_SECTIONS_T = tuple(_SECTIONS.values())

#: flat name (the `run` command's, the Python API's) -> (section, key)
FLAT: dict[str, tuple[str | None, str]] = {
    "run_name": (None, "name"),
    "judges": ("workers", "judges"),
    "judges_files": ("workers", "judges_files"),
    "human_first": ("workers", "human_first"),
    **{f.name: ("inputs", f.name) for f in fields(SpecInputs)},
    "mode": ("protocol", "mode"),
    "pairwise": ("pairwise", "against"),
    "swap": ("pairwise", "swap"),
    "per_criterion": ("pairwise", "per_criterion"),
    **{f.name: ("sampling", f.name) for f in fields(Sampling)},
    "max_cost": ("budget", "max_cost"),
    **{f.name: ("options", f.name) for f in fields(Options)},
    **{f.name: ("probing", f.name) for f in fields(Probing)},
}


def _seq(value: object) -> bool:
    return isinstance(value, list | tuple)


def _mapping(value: object, key: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        where = ".".join(key) + ": " if key else ""
        raise SpecError(f"{where}expected a mapping of keys, got {clip(value)}", key)
    return value


def _known(data: Mapping[str, Any], known: set[str], key: tuple[str, ...]) -> None:
    for k in data:
        if k not in known:
            path = ".".join((*key, str(k)))
            raise SpecError(
                f"unknown key {path!r} (known here: {', '.join(sorted(known))})", (*key, str(k))
            )


def _text(v: object) -> bool:
    return isinstance(v, str)


def _whole(v: object) -> bool:
    return type(v) is int


def _number(v: object) -> bool:
    return type(v) in (int, float) and math.isfinite(float(v))  # type: ignore[arg-type]


#: a field's annotation -> (what it must be, its test)
_TYPES: dict[str, tuple[str, Callable[[object], bool]]] = {
    "str": ("text", _text),
    "str | None": ("text", lambda v: v is None or _text(v)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "int": ("a whole number", _whole),
    "int | None": ("a whole number", lambda v: v is None or _whole(v)),
    "float | None": ("a number", lambda v: v is None or _number(v)),
    "tuple[str, ...]": (
        "a list of texts",
        lambda v: isinstance(v, list | tuple) and all(map(_text, v)),
    ),
}


def decode_section(kind: type[T], value: object, key: tuple[str, ...] = ()) -> T:
    """A typed section (a dataclass of texts, flags, numbers and lists of texts) of plain
    data: SpecError naming the key at fault for an unknown key or a value of the wrong
    type. The one decoder of :class:`RunSpec`'s sections and of the Python API's options."""
    if value is None:
        return kind()
    data = _mapping(value, key)
    _known(data, {f.name for f in fields(kind)}, key)  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for f in fields(kind):  # type: ignore[arg-type]
        if f.name not in data:
            continue
        v = data[f.name]
        what, test = _TYPES[str(f.type)]
        if not test(v):
            path = ".".join((*key, f.name))
            raise SpecError(f"{path}: expected {what}, got {clip(v)}", (*key, f.name))
        if str(f.type) == "float | None" and v is not None:
            v = float(v)
        values[f.name] = tuple(v) if _seq(v) else v
    return kind(**values)


def _at_least(value: int | float | None, low: float, key: tuple[str, ...], high: float) -> None:
    if value is not None and not low <= value <= high:
        top = "" if high == math.inf else f" and at most {high:g}"
        raise SpecError(f"{'.'.join(key)}: {value} must be at least {low:g}{top}", key)


def _check(spec: RunSpec) -> None:
    """The ranges and choices the command line's options check."""
    if spec.protocol.mode not in MODES:
        raise SpecError(
            f"protocol.mode: {clip(spec.protocol.mode)}; choose one of: {', '.join(MODES)}",
            ("protocol", "mode"),
        )
    s = spec.sampling
    _at_least(s.limit, 1, ("sampling", "limit"), math.inf)
    _at_least(s.sample, 1, ("sampling", "sample"), math.inf)
    _at_least(s.samples, 1, ("sampling", "samples"), 20)
    _at_least(spec.budget.max_cost, 0, ("budget", "max_cost"), math.inf)
    _at_least(spec.options.in_flight, 1, ("options", "in_flight"), 100_000)
    _at_least(spec.inputs.max_image_mb, 0.001, ("inputs", "max_image_mb"), 1024)


def load_spec(path: str) -> RunSpec:
    """The spec of a YAML file; InputError naming ``file:line`` (of the key at fault)."""
    text = read_text(path, "a YAML run spec", MAX_SPEC_BYTES)
    try:
        data, root = strict_yaml.parse(text)
    except yaml.YAMLError as exc:
        message, line = strict_yaml.describe(exc, text)
        raise InputError(message, path, line) from None
    try:
        return RunSpec.from_data({} if data is None else data)
    except SpecError as exc:
        raise InputError(exc.message, path, _line(root, exc.key)) from None


def _line(node: yaml.Node | None, key: tuple[str, ...]) -> int | None:
    """The line of the key at ``key`` (of the deepest mapping found on the way)."""
    if node is None:
        return None
    line = int(node.start_mark.line) + 1
    for part in key:
        if not isinstance(node, yaml.MappingNode):
            break
        found = [
            (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part
        ]
        if not found:
            break
        key_node, node = found[0]
        line = int(key_node.start_mark.line) + 1
    return line


def dump_spec(spec: RunSpec) -> str:
    """The YAML text of ``spec``, which :func:`load_spec` reads back to the same spec."""
    return yaml.safe_dump(spec.to_data(), sort_keys=False, allow_unicode=True)


def run_spec(**flat: Any) -> RunSpec:
    """The spec of flat names (:meth:`RunSpec.from_flat`): ``run_spec(instances=...,
    responses=["m=m.jsonl"], judges=["openai/gpt-5.4"], mode="skill")``."""
    return RunSpec.from_flat(flat)


#: every instance, each judged once: the sampling of a spec that names none
NO_SAMPLING = Sampling()
