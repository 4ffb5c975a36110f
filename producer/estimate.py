"""Token and cost estimates before anything is spent (`--dry-run`, `--max-cost`). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from producer.inputs import Inputs
from rubrics.prompt import estimate_tokens, render
from rubrics.skills import SkillSet
from workers.endpoints import JudgeConfig

#: a rationale of two to four sentences per skill plus the final scores line
COMPLETION_TOKENS_PER_SKILL = 120
COMPLETION_TOKENS_PER_CALL = 30


@dataclass(frozen=True)
class CallShape:
    """What one judge call is about (enough to render its prompt)."""

    judge: str
    model: str
    instance_id: str
    skills: tuple[str, ...]


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

    def __init__(self, inputs: Inputs, skillset: SkillSet, judges: Sequence[JudgeConfig]) -> None:
        self.instances = {i.id: i for i in inputs.instances}
        self.responses = {
            (r.model, r.instance_id): r.text for rs in inputs.response_sets for r in rs.responses
        }
        self.skillset = skillset
        self.judges: Mapping[str, JudgeConfig] = {j.name: j for j in judges}

    def tokens(self, call: CallShape) -> tuple[int, int]:
        inst = self.instances[call.instance_id]
        messages = render(
            instruction=inst.instruction,
            reference=inst.answer,
            response=self.responses[(call.model, call.instance_id)],
            skills=[self.skillset.get(s) for s in call.skills],
        )
        completion = COMPLETION_TOKENS_PER_CALL + COMPLETION_TOKENS_PER_SKILL * len(call.skills)
        return estimate_tokens(messages), completion

    def cost(self, call: CallShape) -> float:
        prompt, completion = self.tokens(call)
        return self.judges[call.judge].price.cost(prompt, completion)

    def summarize(self, calls: Iterable[CallShape]) -> list[Estimate]:
        by_judge = {name: Estimate(name) for name in self.judges}
        for call in calls:
            est = by_judge[call.judge]
            prompt, completion = self.tokens(call)
            est.jobs += len(call.skills)
            est.calls += 1
            est.prompt_tokens += prompt
            est.completion_tokens += completion
            est.cost += self.judges[call.judge].price.cost(prompt, completion)
        return list(by_judge.values())


def planned_calls(inputs: Inputs, judges: Sequence[JudgeConfig], mode: str) -> list[CallShape]:
    """Every call a fresh run would make, without touching the store."""
    skills_of = {i.id: i.skills for i in inputs.instances}
    calls = []
    for judge in judges:
        for rs in inputs.response_sets:
            for r in rs.responses:
                skills = skills_of[r.instance_id]
                if mode == "skill":
                    calls += [CallShape(judge.name, rs.model, r.instance_id, (s,)) for s in skills]
                else:
                    calls.append(CallShape(judge.name, rs.model, r.instance_id, tuple(skills)))
    return calls


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
        *(
            sum(getattr(e, f) for e in estimates)
            for f in ("jobs", "calls", "prompt_tokens", "completion_tokens", "cost")
        ),
    )  # type: ignore[arg-type]
    lines.append(
        f"{'total':<48} {total.jobs:>8} {total.calls:>8} {total.prompt_tokens:>12} "
        f"{total.completion_tokens:>11} {total.cost:>10.4f}"
    )
    return "\n".join(lines)
