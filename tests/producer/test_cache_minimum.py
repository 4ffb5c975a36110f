"""The cache estimates of `--dry-run` (and `--max-cost`) count cached tokens only where
the judge's model caches them: from its own minimum prefix (the model table's
cache_min_tokens), and say so where the shared prefix falls short of it."""

from __future__ import annotations

from flask_eval.producer.prefix import PrefixGroup, cache_minimum
from tests.conftest import EXAMPLES
from tests.helpers import cli_env, flask_eval


def test_each_models_minimum_prefix_decides_what_the_estimate_counts_cached(
    sqlite_url: str,
) -> None:
    inputs = [
        "--instances",
        str(EXAMPLES / "instances.jsonl"),
        "--responses",
        f"a={EXAMPLES / 'model_a.jsonl'}",
    ]
    judges = ["--judge", "anthropic/claude-haiku-4-5", "--judge", "anthropic/claude-sonnet-4-5"]
    out = flask_eval("run", *inputs, *judges, "--dry-run", env=cli_env(sqlite_url)).stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines() if "/claude-" in line}
    haiku, sonnet = rows["anthropic/claude-haiku-4-5"], rows["anthropic/claude-sonnet-4-5"]
    # FLASK's shared prefix (~1,100 tokens): cached for Sonnet (1,024), not Haiku 4.5 (4,096)
    assert int(sonnet[5]) > 0 and int(haiku[5]) == 0, out
    assert float(haiku[8]) == float(haiku[9])  # batch + cache = batch: nothing cached
    assert (
        "anthropic/claude-haiku-4-5: its calls share a prompt prefix of about 1,130 "
        "tokens, under its model's prompt-cache minimum of 4,096 tokens"
    ) in out
    assert "anthropic/claude-sonnet-4-5: its calls share" not in out


def test_the_minimum_is_the_models_own() -> None:
    assert cache_minimum("anthropic/claude-opus-4-5") == 4096
    assert cache_minimum("anthropic/claude-3-5-haiku-20241022") == 2048
    assert cache_minimum("gemini/gemini-2.5-pro") == 2048
    assert cache_minimum("openai/gpt-5.4-mini") == cache_minimum("vllm/any") == 1024
    rendered = ((("user", "x" * 4 * 3000 + "a"),), (("user", "x" * 4 * 3000 + "b"),))
    for minimum, cached in ((1024, 2944), (4096, 0)):
        group = PrefixGroup(rendered[0], rendered[0], minimum=minimum)
        for r in rendered:
            group.add(r, 0, 0)
        assert group.prefix_tokens == cached
