"""What a kind of work is, as a plug-in (docs/design/job-kinds.md). Pure.

A :class:`Kind` holds everything that differs between kinds of work; the planner, the
executor, the ledger, the report's refusal, the export, the viewer and the messages ask
it (through ``rubrics.kinds``) instead of naming a kind:

- its protocol (``render`` / ``read``) and its criteria (the rows of one subject);
- its subject: what one row is about (:data:`INSTANCE`: an instance alone, and the
  row's model is none, :data:`NO_MODEL`; :data:`RESPONSE`: a model's response to an
  instance);
- what a done row's answer becomes (:data:`SCORE`, :data:`VERDICT`, :data:`VALUE`,
  :data:`LABELS`);
- its words (:class:`Words`: who does a row's work, what done rows hold);
- the command that runs it and writes what it produced (named when a report is asked of
  it), its export hook (an export row into the kind's record) and its view hook (how the
  viewer shows a stored value).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flask_eval.rubrics.grading import Protocol
from flask_eval.rubrics.skills import SkillSet

#: a row is about an instance alone: no model under test (generation, annotation); the
#: row's model is :data:`NO_MODEL` and no response is stored for it
INSTANCE = "instance"
#: a row is about a model's response to an instance (judgment, critique)
RESPONSE = "response"

#: the model of a row about an instance alone: none. The ledger's empty name, as a
#: row's second model (``model_b``) is for absolute grading: the ledger's columns are
#: never NULL, so that its unique key (run, model, model_b, instance, criterion, worker)
#: holds for every row
NO_MODEL = ""

#: what a done row's answer becomes: a score on the protocol's scale
SCORE = "score"
#: a pairwise verdict
VERDICT = "verdict"
#: a text kept as written (``judgment.value``)
VALUE = "value"
#: labels, as JSON (``judgment.value``)
LABELS = "labels"

#: an export row, as ``storage.exports.export_rows`` yields it (``value`` included for a
#: kind with an export hook)
ExportRow = dict[str, Any]


@dataclass(frozen=True)
class Words:
    """How messages, exports and the viewer name a kind's work."""

    #: who does one row's work: ``judge``, ``model`` (under test), ``annotator``, ...
    worker: str
    #: what its done rows hold, in the plural: ``scores``, ``responses``, ``labels``, ...
    holds: str
    #: what its workers are doing, for progress bars: ``judging``, ``generating``, ...
    doing: str

    @property
    def workers(self) -> str:
        return f"{self.worker}s"


def instance_record(worker: str) -> Callable[[ExportRow], ExportRow]:
    """The export hook of a kind whose rows are about an instance alone: the row as it
    is, without the row's model (there is none) and with the worker named ``worker``
    (``model``, ``annotator``) instead of ``judge``, in the same place; ``value`` (kept
    in ``raw``) is left out."""

    def record(row: ExportRow) -> ExportRow:
        out: ExportRow = {}
        for key, value in row.items():
            if key == "judge":
                out[worker] = value
            elif key not in ("model", "model_b", "value"):
                out[key] = value
        return out

    return record


def as_text(value: str) -> str:
    """A value as the viewer shows it by default: as it is stored."""
    return value


def as_json(value: str) -> str:
    """A JSON value (labels) indented for reading; any other text as it is."""
    try:
        return json.dumps(json.loads(value), ensure_ascii=False, indent=1)
    except ValueError:
        return value


@dataclass(frozen=True)
class Kind:
    """One kind of work: what the registry (``rubrics.kinds``) holds for it."""

    name: str
    #: its protocol, made from the run's mode and the kind's options stored with the run
    protocol: Callable[[str, Mapping[str, Any]], Protocol]
    #: its criteria: the rows of one subject
    criteria: Callable[[Mapping[str, Any]], SkillSet]
    words: Words
    #: one line for `flask-eval --help` (a kind run by the command named after it)
    summary: str = ""
    subject: str = INSTANCE
    answer: str = VALUE
    #: the command that runs it and writes what it produced; '' : the command named after
    #: the kind, which the command line makes from this registry row
    command: str = ""
    #: whether its workers are the models under test (a generation's)
    workers_tested: bool = False
    #: an export row into the kind's record (pure); None: the judgments' export row as is
    export: Callable[[ExportRow], ExportRow] | None = None
    #: how the viewer shows one stored value
    view: Callable[[str], str] = as_text
    #: what a run's fingerprint reads of its criteria (``producer.plan.fingerprint``'s
    #: ``skills``), from the kind's options; None: the criteria as they are. A kind whose
    #: criteria changed keeps what runs stored before were fingerprinted with, so that
    #: their names (which carry the fingerprint) still find them
    fingerprinted: Callable[[Mapping[str, Any]], list[dict[str, Any]]] | None = None

    @property
    def noun(self) -> str:
        """What one row holds once done, for messages (``responses``, ``labels``)."""
        return self.words.holds

    @property
    def scores(self) -> bool:
        """Whether its answers are scores or verdicts: what a report is made of."""
        return self.answer in (SCORE, VERDICT)

    @property
    def cli_command(self) -> str:
        return self.command or self.name

    def refusal(self, run: str) -> str:
        """Why a report of a run of this kind is refused, naming what writes its output."""
        return (
            f"run {run} is a {self.name} run: it has no scores to report; "
            f"`{self.cli_command} --run` writes what it produced"
        )
