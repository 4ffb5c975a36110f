"""Judge probes' names (pure): a probe's counterfactual twin of a response is judged as a
model of its own, ``MODEL~VARIANT`` (docs/design/probes.md).

A model's name holds letters, digits, ``.``, ``_`` and ``-`` only
(``producer.inputs.check_model_name``), so ``~`` never occurs in a user's model: a name
with it is a twin, in the ledger, an export or a bundle, and every ordinary report leaves
it out (:func:`is_twin`). The variants:

- ``length+25``, ``length+50``, ``length+100``: the response padded with filler that adds
  nothing, to that many percent more words;
- ``style``: the response restyled (a markdown header and bullets), the words unchanged;
- ``order``: the response as it is, its criteria presented in the reverse order;
- ``inject-score``: the response with a claim of the top score appended, in the dialect
  of the run's protocol (``[RESULT] 5`` for Prometheus's layouts, ...);
- ``inject-instruction``: the response with an instruction to the judge appended.

Two probes need no twin: the order swap of a pairwise run (its comparisons are judged in
both orders) and self-preference (the response's model family and the judge's are
declared; the judges are compared on the original responses).
"""

from __future__ import annotations

PROBE_SEPARATOR = "~"
LENGTH_PERCENTS = (25, 50, 100)
LENGTH_PREFIX = "length+"
STYLE = "style"
ORDER = "order"
INJECT_SCORE = "inject-score"
INJECT_INSTRUCTION = "inject-instruction"
#: every twin variant, in the card's order
VARIANTS = (
    *(f"{LENGTH_PREFIX}{p}" for p in LENGTH_PERCENTS),
    STYLE,
    ORDER,
    INJECT_SCORE,
    INJECT_INSTRUCTION,
)
#: the probes that need no twin
SWAP = "swap"
SELF = "self"
#: every probe a user can name (``--probes``): the variants, ``length`` for the three
#: paddings, ``inject`` for both injections, and the two without a twin
PROBE_NAMES = ("length", STYLE, ORDER, "inject", SWAP, SELF)
#: what the probe names of ``--probes`` stand for
EXPANDS = {
    "length": tuple(f"{LENGTH_PREFIX}{p}" for p in LENGTH_PERCENTS),
    STYLE: (STYLE,),
    ORDER: (ORDER,),
    "inject": (INJECT_SCORE, INJECT_INSTRUCTION),
    SWAP: (),
    SELF: (),
}


def twin_name(model: str, variant: str) -> str:
    """The ledger name of ``model``'s twin of ``variant``."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown probe variant {variant!r}")
    return f"{model}{PROBE_SEPARATOR}{variant}"


def twin_of(name: str) -> tuple[str, str] | None:
    """``(model, variant)`` of a twin's ledger name, None for any other name."""
    model, sep, variant = name.partition(PROBE_SEPARATOR)
    if not sep or not model or variant not in VARIANTS:
        return None
    return model, variant


def is_twin(name: str) -> bool:
    """Whether ``name`` is a probe's twin (never a user's model: ``~`` is not in one)."""
    return PROBE_SEPARATOR in name


def length_percent(variant: str) -> int | None:
    """The padding of a ``length+N`` variant in percent, None for another variant."""
    if not variant.startswith(LENGTH_PREFIX):
        return None
    tail = variant[len(LENGTH_PREFIX) :]
    return int(tail) if tail.isdigit() and int(tail) in LENGTH_PERCENTS else None


def reversed_criteria(model: str) -> bool:
    """Whether ``model``'s rows are shown their criteria the other way round (an
    ``order`` twin)."""
    twin = twin_of(model)
    return twin is not None and twin[1] == ORDER


def expand(names: tuple[str, ...]) -> tuple[str, ...]:
    """The twin variants of ``--probes`` names, in :data:`VARIANTS` order; ValueError
    naming an unknown name."""
    wanted: set[str] = set()
    for name in names:
        if name not in EXPANDS:
            raise ValueError(f"unknown probe {name!r}; choose from: {', '.join(PROBE_NAMES)}")
        wanted.update(EXPANDS[name])
    return tuple(v for v in VARIANTS if v in wanted)
