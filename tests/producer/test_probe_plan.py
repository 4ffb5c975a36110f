"""A probe run's plan: the twins of each response beside the originals, named
``MODEL~VARIANT``, their texts transformed, the order twin shown its criteria reversed,
pairwise twins compared in both orders, and every probe that cannot apply refused in one
line (exit 2) before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from flask_eval.app import pipeline
from flask_eval.core import probes
from flask_eval.core.errors import InputError
from flask_eval.core.spec import RunSpec
from flask_eval.rubrics.probes import word_count

EXAMPLES = Path(__file__).resolve().parents[2] / "flask_eval" / "examples"


def _spec(**flat: object) -> RunSpec:
    given: dict[str, object] = {
        "instances": str(EXAMPLES / "instances.jsonl"),
        "responses": (f"a={EXAMPLES / 'model_a.jsonl'}", f"b={EXAMPLES / 'model_b.jsonl'}"),
        "judges": ("j=openai/judge",),
    }
    given.update(flat)
    return RunSpec.from_flat(given)


def _texts(plan: pipeline.Plan, model: str) -> dict[str, str]:
    rs = next(rs for rs in plan.inputs.response_sets if rs.model == model)
    return {r.instance_id: r.text for r in rs.responses}


def _one_line(exc: pytest.ExceptionInfo[InputError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and exc.value.exit_code == 2
    return text


def test_twins_are_models_of_their_own_with_their_texts_transformed() -> None:
    plain = pipeline.prepare(_spec())
    plan = pipeline.prepare(_spec(probes=("length", "style", "order", "inject")))
    models = [rs.model for rs in plan.inputs.response_sets]
    assert models[:2] == ["a", "b"]
    assert set(models[2:]) == {probes.twin_name(m, v) for m in "ab" for v in probes.VARIANTS}
    original = _texts(plan, "a")
    padded = _texts(plan, "a~length+100")
    for iid, text in original.items():
        assert word_count(padded[iid]) >= 2 * word_count(text)
        assert word_count(_texts(plan, "a~style")[iid]) == word_count(text)
        assert _texts(plan, "a~order")[iid] == text
        assert _texts(plan, "a~inject-score")[iid].startswith(text.rstrip()[:20])
        assert _texts(plan, "a~inject-score")[iid] != text
    # every twin is judged as the original is: 1 + 7 variants' rows
    assert plan.size() == plain.size() * (1 + len(probes.VARIANTS))
    assert plan.probes is not None and plan.probes["variants"] == list(probes.VARIANTS)
    assert plan.fingerprint != plain.fingerprint


def test_the_order_twin_is_shown_its_criteria_the_other_way_round() -> None:
    plan = pipeline.prepare(_spec(probes=("order",), limit=1))
    context = plan.context()
    instance = plan.inputs.instances[0]
    criteria = [context.criterion(c, instance.rubrics) for c in instance.skills]
    shown = {}
    for model in ("a", "a~order"):
        subject = context.subject(instance.instruction, instance.answer, "text", model=model)
        messages, _ = context.prompt("j", subject, criteria)
        prompt = "\n".join(str(m["content"]) for m in messages)
        shown[model] = sorted(instance.skills, key=prompt.index)
    assert shown["a~order"] == list(reversed(shown["a"]))


def test_pairwise_twins_are_compared_in_both_orders() -> None:
    plan = pipeline.prepare(_spec(probes=("style", "swap"), pairwise="all"))
    assert plan.pairs is not None
    pairs = set(plan.pairs)
    assert {("a", "b"), ("b", "a")} <= pairs
    for first, second in (("a", "b"), ("b", "a")):
        twin = probes.twin_name(first, probes.STYLE)
        assert (twin, second) in pairs and (second, twin) in pairs
    assert len(pairs) == 2 + 4


@pytest.mark.parametrize(
    ("flat", "says"),
    [
        ({"probes": ("swap",)}, "--probes swap: the order swap probes a pairwise run"),
        ({"probes": ("self",)}, "--probes self: self-preference needs --family"),
        ({"probes": ("length",), "families": ("nobody=x",)}, "is neither a model nor a judge"),
        ({"probes": ("length",), "families": ("a",)}, "expected NAME=FAMILY"),
        ({"probes": ("length",), "families": ("a=x y",)}, "a family is letters"),
        ({"families": ("a=x",)}, "--family goes with --probes"),
        ({"probes": ("loudness",)}, "unknown probe 'loudness'"),
        ({"probes": ("order",), "mode": "skill"}, "--probes order: the criteria's order"),
    ],
)
def test_a_probe_that_cannot_apply_is_refused_in_one_line(
    flat: dict[str, object], says: str
) -> None:
    with pytest.raises(InputError) as exc:
        pipeline.prepare(_spec(**flat))
    assert says in _one_line(exc)


def test_people_are_not_asked_to_rate_twins(tmp_path: Path) -> None:
    judges = tmp_path / "judges.yaml"
    judges.write_text("- spec: openai/judge\n- spec: human/ann\n")
    spec = _spec(judges=(), judges_files=(str(judges),), probes=("style",))
    with pytest.raises(InputError) as exc:
        pipeline.prepare(spec)
    assert "people rate a run's own responses, not a probe's twins" in _one_line(exc)


def test_the_order_probe_needs_a_judge_that_asks_for_several_criteria(tmp_path: Path) -> None:
    judges = tmp_path / "judges.yaml"
    judges.write_text("- spec: openai/judge\n  name: p\n  protocol: prometheus\n")
    spec = _spec(judges=(), judges_files=(str(judges),), probes=("order",))
    with pytest.raises(InputError) as exc:  # Prometheus' layout asks one rubric a call
        pipeline.prepare(spec)
    assert "--probes order: the criteria's order" in _one_line(exc)
    spec = _spec(judges=(), judges_files=(str(judges),), probes=("all",))
    assert "order" in (pipeline.prepare(spec).probes or {})["left_out"]


def test_all_leaves_out_what_cannot_apply_and_says_why() -> None:
    plan = pipeline.prepare(_spec(probes=("all",)))
    assert plan.probes is not None
    assert set(plan.probes["left_out"]) == {"swap", "self"}
    assert plan.probes["probes"] == ["length", "style", "order", "inject"]
    declared = pipeline.prepare(_spec(probes=("all",), families=("a=acme", "j=acme", "b=other")))
    assert declared.probes is not None and "self" in declared.probes["probes"]
    assert declared.probes["families"] == {"a": "acme", "b": "other", "j": "acme"}


def test_a_model_name_too_long_for_its_twins_is_refused() -> None:
    long = "m" * 60
    spec = _spec(responses=(f"{long}={EXAMPLES / 'model_a.jsonl'}",), probes=("inject",))
    with pytest.raises(InputError) as exc:
        pipeline.prepare(spec)
    assert "longer than 64 characters" in _one_line(exc)
