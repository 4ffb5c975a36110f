"""Token and cost estimates before anything is spent (`--dry-run`, `--max-cost`).

A call's prompt tokens are estimated from its rendered messages (each judge's grading
protocol renders them exactly as the workers will), its completion tokens from the
protocol's expected answer length. The texts come from the inputs being planned, or,
for `resume`, from the run's ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from flask_eval.core.types import Instance
from flask_eval.producer.context import RunContext
from flask_eval.producer.inputs import Inputs
from flask_eval.rubrics.prompt import estimate_tokens
from flask_eval.storage.records import PlannedCall, RunInfo
from flask_eval.storage.store import Store


@dataclass
class Estimate:
    judge: str
    jobs: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0


class Estimator:
    """Estimated tokens and cost of a call, from its rendered prompt."""

    def __init__(
        self,
        instances: Mapping[str, tuple[str, str]],
        responses: Mapping[tuple[str, str], str],
        context: RunContext,
        own: Mapping[str, Instance] | None = None,
    ) -> None:
        self.instances = instances  # id -> (instruction, reference)
        self.responses = responses  # (model, instance id) -> text
        self.context = context
        self.own = own or {}  # id -> the instance, for its system prompt and own rubrics

    @classmethod
    def of_inputs(cls, inputs: Inputs, context: RunContext) -> Estimator:
        return cls(
            {i.id: (i.instruction, i.answer) for i in inputs.instances},
            {(r.model, r.instance_id): r.text for rs in inputs.response_sets for r in rs.responses},
            context,
            {i.id: i for i in inputs.instances if i.rubrics or i.system_prompt},
        )

    @classmethod
    def of_run(cls, store: Store, run: RunInfo) -> Estimator:
        """From the texts stored with the run (for `resume` and later runs)."""
        instances, responses = store.run_texts(run.id)
        return cls(instances, responses, RunContext.from_config(run.config))

    def tokens(self, call: PlannedCall) -> tuple[int, int]:
        instruction, reference = self.instances[call.instance_id]
        protocol = self.context.protocol_for(call.judge)
        own = self.own.get(call.instance_id)
        rubrics = own.rubrics if own is not None else {}
        criteria = [self.context.criterion(c, rubrics) for c in call.criteria]
        second = self.responses.get((call.model_b, call.instance_id)) if call.model_b else None
        subject = self.context.subject(
            instruction,
            reference,
            self.responses[(call.model, call.instance_id)],
            own.system_prompt if own is not None else "",
            second,
        )
        judge = self.context.judges.get(call.judge)
        structured = judge is not None and judge.structured
        messages = (protocol.render_structured(subject, criteria) if structured
                    else protocol.render(subject, criteria))  # fmt: skip
        return estimate_tokens(messages), protocol.completion_tokens(criteria)

    def cost(self, call: PlannedCall) -> float:
        prompt, completion = self.tokens(call)
        return self.context.judges[call.judge].price.cost(prompt, completion)

    def summarize(self, calls: Iterable[PlannedCall]) -> list[Estimate]:
        by_judge = {name: Estimate(name) for name in self.context.judges}
        for call in calls:
            est = by_judge[call.judge]
            prompt, completion = self.tokens(call)
            est.jobs += len(call.criteria)
            est.calls += 1
            est.prompt_tokens += prompt
            est.completion_tokens += completion
            est.cost += self.context.judges[call.judge].price.cost(prompt, completion)
        return list(by_judge.values())


def planned_calls(
    inputs: Inputs, context: RunContext, pairs: Sequence[tuple[str, str]] | None = None
) -> list[PlannedCall]:
    """Every call a fresh run would make, without touching the store (``pairs``: the
    ordered model pairs of a pairwise run)."""
    from flask_eval.producer.pairs import planned_pairwise_rows
    from flask_eval.producer.plan import group_calls
    from flask_eval.storage.records import OpenRow

    if pairs is not None:
        return group_calls(planned_pairwise_rows(inputs, pairs, list(context.judges)), context)
    criteria_of = {i.id: i.skills for i in inputs.instances}
    rows = [
        OpenRow(0, rs.model, "", r.instance_id, criterion, judge)
        for judge in context.judges
        for rs in inputs.response_sets
        for r in rs.responses
        for criterion in criteria_of[r.instance_id]
    ]
    return group_calls(rows, context)


def format_estimates(estimates: Sequence[Estimate]) -> str:
    header = (
        f"{'judge':<48} {'jobs':>8} {'calls':>8} {'prompt tok':>12} "
        f"{'compl. tok':>11} {'cost USD':>10}"
    )
    lines = [header, "-" * len(header)]
    for e in estimates:
        lines.append(
            f"{e.judge[:48]:<48} {e.jobs:>8} {e.calls:>8} {e.prompt_tokens:>12} "
            f"{e.completion_tokens:>11} {e.cost:>10.4f}"
        )
    total = Estimate(
        "total",
        sum(e.jobs for e in estimates),
        sum(e.calls for e in estimates),
        sum(e.prompt_tokens for e in estimates),
        sum(e.completion_tokens for e in estimates),
        sum(e.cost for e in estimates),
    )
    lines.append(
        f"{'total':<48} {total.jobs:>8} {total.calls:>8} {total.prompt_tokens:>12} "
        f"{total.completion_tokens:>11} {total.cost:>10.4f}"
    )
    return "\n".join(lines)
