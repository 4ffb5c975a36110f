"""A repeated judgment's samples in the answer cache (workers/context.py): sample 1 keeps
the key of a single judgment, each later sample has a key of its own and sends its index
as the request's seed."""

from __future__ import annotations

from flask_eval.core.types import JudgeConfig, JudgeSpec
from flask_eval.producer.samples import sampled
from flask_eval.workers.context import cache_key, generate_config
from flask_eval.workers.judge import Message
from flask_eval.workers.providers.openai_judge import OpenAIJudge

MESSAGES: list[Message] = [{"role": "user", "content": "Score this."}]


def test_sample_one_keeps_the_key_and_later_samples_differ() -> None:
    judge = JudgeConfig("j", "openai/gpt-x")
    single = cache_key("openai/gpt-x", MESSAGES, generate_config(judge, 60.0))
    samples = sampled([judge], 3)
    assert [s.name for s in samples] == ["j#1", "j#2", "j#3"]
    keys = [cache_key("openai/gpt-x", MESSAGES, generate_config(s, 60.0)) for s in samples]
    assert keys[0] == single and len(set(keys)) == 3
    assert [generate_config(s, 60.0).seed for s in samples] == [None, 2, 3]
    # stored configs: only a later sample says which it is
    assert "sample" not in samples[0].to_data() and samples[2].to_data()["sample"] == 3
    assert JudgeConfig.from_data(samples[2].to_data()) == samples[2]


def test_the_openai_request_carries_the_seed_of_a_later_sample() -> None:
    judge = OpenAIJudge(JudgeSpec.parse("openai/gpt-x@http://127.0.0.1:9/v1"))  # no key needed
    second = generate_config(JudgeConfig("j#2", "openai/gpt-x", sample=2), 60.0)
    assert judge.request_body(MESSAGES, second)["seed"] == 2
    first = generate_config(JudgeConfig("j#1", "openai/gpt-x"), 60.0)
    assert "seed" not in judge.request_body(MESSAGES, first)
