"""Estimates render a conversation's turn with the turns before it, as the workers do
(producer/estimate.py): a dry run of a two-turn conversation counts, for its turn 2, the
earlier user turn, its reference and the model's own earlier answer; a generation's
turn 2 is counted with a stand-in for the model's turn-1 answer."""

from __future__ import annotations

import json
from pathlib import Path

from flask_eval import api
from flask_eval.rubrics.generation import GENERATION_COMPLETION_TOKENS
from tests.helpers import _as_a_fresh_process, cli_env

U1, U2 = "Tell me about volcanoes. " * 80, "Now about glaciers. " * 60
R1, R2 = "Volcanoes erupt. " * 70, "Glaciers flow. " * 50
A1, A2 = "Magma rises from below. " * 90, "Ice moves slowly. " * 75
JUDGE = "openai/gpt-5.4-mini"


def files(tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    """The same two instructions and answers as one conversation, and as two one-shot
    instances."""
    conv, one = tmp_path / "conv", tmp_path / "one"
    conv.mkdir()
    one.mkdir()
    (conv / "i.jsonl").write_text(
        json.dumps({"id": "c1", "turns": [U1, U2], "references": [R1, R2]}) + "\n"
    )
    (conv / "r.jsonl").write_text(json.dumps({"question_id": "c1", "turns": [A1, A2]}) + "\n")
    (one / "i.jsonl").write_text(
        "".join(
            json.dumps({"id": f"s{k}", "turns": [u], "references": [r]}) + "\n"
            for k, (u, r) in enumerate([(U1, R1), (U2, R2)], 1)
        )
    )
    (one / "r.jsonl").write_text(
        "".join(
            json.dumps({"question_id": f"s{k}", "turns": [a]}) + "\n"
            for k, a in enumerate([A1, A2], 1)
        )
    )
    return {"conv": (conv / "i.jsonl", conv / "r.jsonl"), "one": (one / "i.jsonl", one / "r.jsonl")}


def test_a_dry_run_counts_turn_two_with_the_conversation_before_it(
    tmp_path: Path, sqlite_url: str
) -> None:
    tokens = {}
    with _as_a_fresh_process(cli_env(sqlite_url)):
        for name, (instances, responses) in files(tmp_path).items():
            (est,) = api.judge(str(instances), {"m": str(responses)}, judges=[JUDGE], dry_run=True)
            assert est["calls"] == 2
            tokens[name] = est["prompt_tokens"]
    earlier = (len(U1) + len(R1) + len(A1)) // 4
    extra = tokens["conv"] - tokens["one"]
    # the earlier turn's texts, and the few lines that frame and name the turns
    assert earlier <= extra <= earlier + 250, (extra, earlier)


def test_a_generation_dry_run_counts_turn_two_with_a_stand_in_answer(
    tmp_path: Path, sqlite_url: str
) -> None:
    tokens = {}
    with _as_a_fresh_process(cli_env(sqlite_url)):
        for name, (instances, _) in files(tmp_path).items():
            (est,) = api.generate(str(instances), models=[JUDGE], dry_run=True)
            assert est["calls"] == 2
            tokens[name] = est["prompt_tokens"]
    earlier = len(U1) // 4 + GENERATION_COMPLETION_TOKENS
    extra = tokens["conv"] - tokens["one"]
    assert earlier <= extra <= earlier + 20, (extra, earlier)
