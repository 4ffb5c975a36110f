"""BiGGen Bench's pipeline, where the report must follow it (pure).

BiGGen's response-evaluation script (``BiGGen-Bench/run_response_eval.py`` of
prometheus-eval) treats the instances whose id contains ``llm_judge`` (its refinement
tasks ``llm_judge_absolute`` and ``llm_judge_relative``: 18 instances that ask the model
to grade another model's answer) apart: it skips them for Prometheus evaluators and grades
them with a prompt of their own for other evaluators. flask-eval leaves them out of a
BiGGen run by default (``producer.biggen.load_biggen``); :func:`llm_judge_notes` says what
a report's refinement and overall then are, against BiGGen's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: the mark of BiGGen's llm_judge instances (in their id, as BiGGen tests it)
LLM_JUDGE = "llm_judge"
#: the protocol of judges BiGGen's pipeline treats as Prometheus evaluators
PROMETHEUS = "prometheus"


def is_llm_judge(instance_id: str) -> bool:
    """Whether BiGGen's pipeline treats this instance apart (see the module docstring)."""
    return LLM_JUDGE in instance_id


def llm_judge_notes(instances: Sequence[str], protocols: Mapping[str, str | None]) -> list[str]:
    """The notes of a BiGGen run (instances carrying capabilities) about the llm_judge
    instances: left out (the default), or graded, per judge (``protocols``: judge name ->
    its protocol, None for the default one)."""
    graded = [i for i in instances if is_llm_judge(i)]
    if not graded:
        return [
            "BiGGen's llm_judge_* instances (refinement tasks in which the model grades "
            "another model's answer) are not in this run: BiGGen's own pipeline skips them "
            "for Prometheus evaluators, and flask-eval leaves them out for every judge "
            "unless `run --biggen-llm-judge`. For other evaluators BiGGen grades them with a "
            "prompt of its own, so a non-Prometheus judge's refinement and overall here are "
            "over the other refinement instances."
        ]
    notes = []
    for judge, protocol in protocols.items():
        if protocol == PROMETHEUS:
            notes.append(
                f"judge {judge} (prometheus protocol) graded BiGGen's {len(graded)} "
                "llm_judge_* instances, which BiGGen's pipeline skips for Prometheus "
                "evaluators: its refinement and overall include them, unlike BiGGen's"
            )
        else:
            notes.append(
                f"judge {judge} graded BiGGen's {len(graded)} llm_judge_* instances with "
                "the standard layout; BiGGen grades them with a prompt of its own for such "
                "evaluators, so its refinement and overall may differ from BiGGen's"
            )
    return notes
