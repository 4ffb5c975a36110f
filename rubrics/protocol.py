"""The wire contract between our judge prompts and judge outputs (pure, no I/O).

A judge prompt ends with a machine-readable line naming the skills to score::

    Skills to score: ["Readability", "Logical Correctness"]

and asks the judge to finish its answer with exactly one final line::

    [SCORES] {"Readability": 4, "Logical Correctness": "N/A"}

The parser (``rubrics.parse``) reads scores only from that final line; the simulator
(``simulator``) reads the skills line, the response block and the reference section to
know what to answer. Both sides import the markers from this module, so they cannot drift
apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

#: the untrusted response sits between these two lines of a prompt
RESPONSE_START = "<<<RESPONSE"
RESPONSE_END = "RESPONSE>>>"
#: the heading of the reference answer's section of a prompt
REFERENCE_HEADING = "## Reference answer"
#: the verdict marker of evaluator LMs trained on Prometheus's format
RESULT_MARKER = "[RESULT]"
SCORES_MARKER = "[SCORES]"
SKILLS_LINE_PREFIX = "Skills to score:"
NA = "N/A"


def skills_line(skills: Sequence[str]) -> str:
    """The line a prompt carries to name the skills it asks for."""
    return f"{SKILLS_LINE_PREFIX} {json.dumps(list(skills), ensure_ascii=False)}"


def requested_skills(prompt: str) -> list[str] | None:
    """The skills named by the last skills line of ``prompt``, or None if there is none.

    The last line wins because our prompts place it after the (untrusted) response.
    """
    for line in reversed(prompt.splitlines()):
        if line.startswith(SKILLS_LINE_PREFIX):
            try:
                value = json.loads(line[len(SKILLS_LINE_PREFIX) :])
            except json.JSONDecodeError:
                return None
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return value
            return None
    return None


def scores_line(scores: Mapping[str, int | None]) -> str:
    """The final line a judge writes; None means N/A."""
    payload = {k: (NA if v is None else v) for k, v in scores.items()}
    return f"{SCORES_MARKER} {json.dumps(payload, ensure_ascii=False)}"
