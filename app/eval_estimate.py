"""`eval --dry-run`: what an evaluation would cost, step by step, before anything is sent
or stored.

The generation and the annotation are estimated as `run --dry-run` estimates a run
(their prompts are known). The judging is not: its prompts hold responses not written
yet. It is estimated on stand-ins, each model's response to each instance a text of the
length the generation estimate assumes (:data:`GENERATION_COMPLETION_TOKENS`), and each
instance still to be annotated judged on as many skills as an annotator names
(``LabelSpace.top_skills``). A model may write up to its ``max_tokens``: the generation's
cost at that length is given beside it, as its upper bound. The stand-ins go through the
judging's own planning (``pipeline.prepare``) in a temporary directory that is removed.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from flask_eval.app import pipeline
from flask_eval.app.annotation import write_instances
from flask_eval.app.cache import LedgerCache
from flask_eval.app.conversation_records import grouped
from flask_eval.app.evaluate import EvalPlan
from flask_eval.app.generation import flask_id
from flask_eval.app.jobs import labelled
from flask_eval.core.spec import Protocol, RunSpec, SpecInputs, Workers
from flask_eval.core.types import Instance
from flask_eval.producer.estimate import Estimate
from flask_eval.producer.estimate_format import format_estimates
from flask_eval.producer.sampling import SampledEstimate
from flask_eval.rubrics import kinds
from flask_eval.rubrics.criteria import load_criteria
from flask_eval.rubrics.generation import GENERATION_COMPLETION_TOKENS
from flask_eval.rubrics.labels import flask_label_space, label_space_of


def step_estimates(plan: EvalPlan, cache: LedgerCache | None) -> dict[str, list[SampledEstimate]]:
    """Each step's estimate (``generate``, ``annotate`` where the instances need labels,
    ``judge`` on stand-in responses); nothing is written but a temporary directory,
    removed; nothing is sent."""
    steps = {"generate": plan.generation.sampled().summarize(cache)}
    if plan.annotation is not None:
        steps["annotate"] = plan.annotation.sampled().summarize(cache)
    steps["judge"] = _judging(plan).sampled().summarize(cache)
    return steps


def estimate_eval(plan: EvalPlan, cache: LedgerCache | None) -> list[str]:
    """The lines of ``plan``'s dry run: each step's estimate table."""
    steps = step_estimates(plan, cache)
    generation = steps["generate"]
    lines = [
        f"generate ({len(plan.generation.judges)} models; each response estimated at "
        f"~{GENERATION_COMPLETION_TOKENS} tokens):",
        format_estimates(generation, kinds.kind(kinds.GENERATION).words.worker),
        *_upper_bounds(plan, generation),
    ]
    if "annotate" in steps:
        annotator = kinds.kind(kinds.ANNOTATION).words.worker
        lines += ["annotate:", format_estimates(steps["annotate"], annotator)]
    lines += [
        f"judge (on stand-in responses of ~{GENERATION_COMPLETION_TOKENS} tokens: the "
        "responses are not written yet):",
        format_estimates(steps["judge"]),
    ]
    every = [e for step in steps.values() for e in step]
    unknown = [e.judge for e in every if e.unknown]
    total = sum(e.cost for e in every)
    lines.append(
        f"eval {plan.name}, every step, live: "
        + (
            f"unknown (no price for {', '.join(unknown)}; >= {total:.4f} USD priced)"
            if unknown
            else f"~{total:.4f} USD"
        )
    )
    return lines


def _upper_bounds(plan: EvalPlan, estimates: Sequence[Estimate]) -> list[str]:
    """Per priced model: the generation's cost if every response reached max_tokens."""
    models = {m.name: m for m in plan.generation.judges}
    lines = []
    for e in estimates:
        model = models.get(e.judge)
        if model is None or e.unknown or not e.calls:
            continue
        if not model.max_tokens:
            lines.append(
                f"{e.judge}: no max_tokens, so no upper bound: a response is as long "
                "as the model makes it (give max_tokens in a models file)"
            )
            continue
        most = model.cost(e.prompt_tokens, e.calls * model.max_tokens, batch=model.batch)
        lines.append(
            f"{e.judge}: up to {most:.4f} USD if every response reaches its max_tokens "
            f"({model.max_tokens})"
        )
    return lines


def _judging(plan: EvalPlan) -> pipeline.Plan:
    """The judging step's plan on stand-in responses and labels."""
    space = label_space_of(load_criteria(plan.criteria)) if plan.criteria else flask_label_space()
    skills = tuple(name for name, _ in space.skills[: space.top_skills])
    instances = [  # a conversation is not annotated: judged as it is
        i if labelled(i) or i.conversation else replace(i, skills=i.skills or skills)
        for i in plan.instances
    ]
    with tempfile.TemporaryDirectory(prefix="flask-eval-dry-run-") as tmp:
        path = Path(tmp)
        write_instances(
            instances, str(path / "instances.jsonl"), {}, [], custom=plan.criteria is not None
        )
        responses = []
        for k, model in enumerate(plan.generation.judges):
            file = path / f"{k}.jsonl"
            file.write_text("".join(_stand_in(i) for i in grouped(instances)), encoding="utf-8")
            responses.append(f"{model.name}={file}")
        judged = pipeline.prepare(
            RunSpec(
                name=f"{plan.name}-judge",
                workers=Workers(tuple(plan.judges_specs), tuple(plan.judges_files)),
                inputs=SpecInputs(
                    instances=str(path / "instances.jsonl"),
                    responses=tuple(responses),
                    criteria=plan.criteria,
                ),
                protocol=Protocol(plan.mode),
            )
        )
        # the responses are read while planning: held, so the directory may go
        inputs = judged.inputs
        held = tuple(replace(rs, responses=tuple(rs.responses)) for rs in inputs.response_sets)
        return replace(judged, inputs=replace(inputs, response_sets=held))


def _stand_in(instance: Instance | list[Instance]) -> str:
    """A stand-in response line: to an instance, or to each turn of a conversation."""
    text = "lorem ipsum " * (GENERATION_COMPLETION_TOKENS // 3)  # ~4 characters a token
    if isinstance(instance, list):
        last = instance[-1]
        turns = [text] * (last.turn or 1)
        return json.dumps({"question_id": last.conversation, "turns": turns}) + "\n"
    return json.dumps({"question_id": flask_id(instance.id), "text": text}) + "\n"
