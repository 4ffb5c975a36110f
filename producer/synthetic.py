"""Synthetic FLASK-format inputs of any size, for tests and benchmarks (no third-party text)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from flask_eval.core.types import DIFFICULTY_LABELS, DOMAINS
from flask_eval.rubrics.skills import load_default

WORDS = [
    "river",
    "stone",
    "apple",
    "number",
    "graph",
    "orbit",
    "market",
    "theorem",
    "poem",
    "vaccine",
    "ledger",
]


def write_inputs(
    folder: Path,
    n: int,
    models: tuple[str, ...] = ("m1", "m2"),
    seed: int = 0,
    texts: dict[int, str] | None = None,
    words: tuple[int, int] = (3, 12),
) -> tuple[Path, list[str]]:
    """``n`` instances and one responses file per model, each response (unless ``texts``
    gives it) of ``words`` words, from the first to the second at random; returns
    (instances, NAME=PATH args)."""
    rng = random.Random(seed)
    skills = load_default().names
    folder.mkdir(parents=True, exist_ok=True)
    instances = folder / "instances.jsonl"
    with instances.open("w") as f:
        for i in range(1, n + 1):
            record = {
                "idx": i,
                "instruction": f"Explain {rng.choice(WORDS)} and {rng.choice(WORDS)} in case {i}.",
                "answer": " ".join(rng.choices(WORDS, k=8)),
                "skill": rng.sample(skills, 3),
                "domain": rng.sample(DOMAINS, rng.choice((1, 2))),
                "difficulty": DIFFICULTY_LABELS[i % 5],
            }
            f.write(json.dumps(record) + "\n")
    args = []
    for m in models:
        path = folder / f"{m}.jsonl"
        with path.open("w") as f:
            for i in range(1, n + 1):
                text = (texts or {}).get(i) or " ".join(rng.choices(WORDS, k=rng.randint(*words)))
                f.write(json.dumps({"question_id": i, "text": text}) + "\n")
        args.append(f"{m}={path}")
    return instances, args
