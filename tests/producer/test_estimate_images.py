"""Image tokens in the estimates (`--dry-run`): each call of an instance with images
counts them by its judge's provider's rule (core/image_tokens.py), shown per judge."""

from __future__ import annotations

from flask_eval.core.image_tokens import image_tokens
from flask_eval.core.images import ImageRef
from flask_eval.core.types import Instance, JudgeConfig, Price, Response, ResponseSet
from flask_eval.producer.context import RunContext
from flask_eval.producer.estimate import Estimator
from flask_eval.producer.estimate_format import format_estimates
from flask_eval.producer.inputs import Inputs
from flask_eval.producer.plan import planned_calls
from flask_eval.producer.sampling import CallSampler
from flask_eval.rubrics.skills import load_default

SKILLS = load_default()
JUDGES = {
    "gpt": JudgeConfig("gpt", "openai/gpt-4o", price=Price(2.5, 10.0)),
    "claude": JudgeConfig("claude", "anthropic/claude-haiku-4-5", price=Price(1.0, 5.0)),
    "gemini": JudgeConfig("gemini", "gemini/gemini-2.5-flash", price=Price(0.3, 2.5)),
}
SIZES = [(320, 200), (1024, 1024), (2048, 4096), (1600, 900), (64, 64)]


def ref(n: int, width: int, height: int) -> ImageRef:
    return ImageRef(f"{n:064x}", "image/png", width, height, 1000 + n)


def inputs() -> Inputs:
    """Five instances, the first four with one or two images, the last with none, each
    judged on two skills and answered by two models."""
    skills = tuple(SKILLS.names[:2])
    instances = []
    for n in range(5):
        pictures = () if n == 4 else tuple(ref(k, *SIZES[k]) for k in range(n, min(n + 2, 4)))
        instances.append(
            Instance(str(n), f"What does image {n} show?", "", skills, images=pictures)
        )
    sets = tuple(
        ResponseSet(m, f"{m}.jsonl", tuple(Response(m, str(n), f"{m} sees it") for n in range(5)))
        for m in ("m1", "m2")
    )
    return Inputs(tuple(instances), sets)


def rule_sum(data: Inputs, context: RunContext) -> dict[str, int]:
    """Per judge: each planned call's images by the provider's rule."""
    own = {i.id: i.images for i in data.instances}
    out = dict.fromkeys(context.judges, 0)
    for call in planned_calls(data, context):
        provider, _, model = context.judges[call.judge].spec.partition("/")
        out[call.judge] += sum(
            image_tokens(provider, model, i.width, i.height) for i in own[call.instance_id]
        )
    return out


def test_dry_run_counts_each_providers_image_tokens_per_judge() -> None:
    data = inputs()
    context = RunContext(SKILLS, JUDGES, "instance")
    expected = rule_sum(data, context)
    assert len(set(expected.values())) == 3 and all(expected.values())  # three rules differ
    exact = Estimator.of_inputs(data, context).summarize(planned_calls(data, context))
    assert {e.judge: e.image_tokens for e in exact} == expected
    sampled = CallSampler.of_estimator(
        Estimator.of_inputs(data, context), planned_calls(data, context)
    ).summarize()
    assert {e.judge: e.image_tokens for e in sampled} == expected
    # the images are in the prompt tokens: the same run without them has that many fewer
    bare = Inputs(
        tuple(Instance(i.id, i.instruction, "", i.skills) for i in data.instances),
        data.response_sets,
    )
    without = Estimator.of_inputs(bare, context).summarize(planned_calls(bare, context))
    for e, w in zip(exact, without, strict=True):
        assert e.prompt_tokens - w.prompt_tokens == expected[e.judge]
    table = format_estimates(exact)
    for name, tokens in expected.items():
        assert f"{name}: {tokens:,} prompt tokens are images'" in table
    assert f"total: {sum(expected.values()):,} prompt tokens are images'" in table


def test_a_run_without_images_says_nothing_of_them() -> None:
    data = inputs()
    bare = Inputs(
        tuple(Instance(i.id, i.instruction, "", i.skills) for i in data.instances),
        data.response_sets,
    )
    context = RunContext(SKILLS, JUDGES, "instance")
    table = format_estimates(
        Estimator.of_inputs(bare, context).summarize(planned_calls(bare, context))
    )
    assert "images'" not in table
