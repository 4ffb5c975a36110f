"""Planning a run: its identity (fingerprint), name and stored configuration. Pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from producer.inputs import Inputs
from workers.endpoints import JudgeConfig

MODES = ("instance", "skill")
#: One call per (instance, response, judge) scoring all of the instance's skills: FLASK's
#: own protocol, ~2.5x fewer prompt tokens (docs/design/job-granularity.md).
DEFAULT_MODE = "instance"


def fingerprint(
    inputs: Inputs, judges: Sequence[str], mode: str, skills: list[dict[str, Any]]
) -> str:
    """A digest of everything that decides what is judged and how."""
    h = hashlib.sha256()

    def feed(obj: Any) -> None:
        h.update(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")

    feed({"mode": mode, "judges": sorted(judges), "skills": skills})
    for i in sorted(inputs.instances, key=lambda i: i.id):
        feed([i.id, i.instruction, i.answer, list(i.skills), list(i.domains), i.difficulty])
    for rs in sorted(inputs.response_sets, key=lambda rs: rs.model):
        for r in sorted(rs.responses, key=lambda r: r.instance_id):
            feed([rs.model, r.instance_id, r.text])
    return h.hexdigest()


def default_run_name(digest: str) -> str:
    return f"run-{digest[:10]}"


def run_config(
    inputs: Inputs,
    judges: Sequence[JudgeConfig],
    mode: str,
    skills: list[dict[str, Any]],
    instances_path: str,
) -> dict[str, Any]:
    """What the store keeps about a run (never secrets: judge specs carry no keys)."""
    return {
        "judges": [j.to_data() for j in judges],
        "mode": mode,
        "skills": skills,
        "instances_path": instances_path,
        "responses": {rs.model: rs.path for rs in inputs.response_sets},
        "coverage": {m: list(c) for m, c in inputs.coverage().items()},
    }


def batches(calls: Sequence[list[int]], size: int) -> list[list[list[int]]]:
    """Pack judge calls into messages of ``size`` calls each."""
    return [list(calls[i : i + size]) for i in range(0, len(calls), size)]
