"""`run --perception-bench` as a user runs it: Perception-Bench records (an image, the
question, a reference answer and the record's own rubric) judged by a Prometheus-Vision
judge on an OpenAI-compatible server (the in-thread simulator): every record judged on its
rubric, with its own image sent, byte for byte."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from flask_eval.simulator.config import SimConfig
from flask_eval.simulator.testing import running_simulator
from tests.helpers import cli_env, flask_eval
from tests.imagegen import encode, shapes


def test_perception_bench_records_are_judged_with_their_images(
    tmp_path: Path, sqlite_url: str
) -> None:
    counts = [1, 2, 3, 4]
    images = [
        encode(shapes({"circle": n}, seed=n), fmt)
        for n, fmt in zip(counts, ["PNG", "JPEG"] * 2, strict=True)
    ]
    records = []
    for n, data in enumerate(images):
        (tmp_path / f"{n}.img").write_bytes(data)
        records.append(
            {
                "image": f"{n}.img" if n % 2 else {"bytes": base64.b64encode(data).decode()},
                "instruction": "(Prometheus-Vision's filled prompt: not used)",
                "orig_instruction": "How many circles are there?",
                "orig_reference_answer": f"There are {counts[n]} circles.",
                "orig_criteria": "Does the answer count the circles correctly?",
                **{f"orig_score{k}_description": f"level {k}" for k in range(1, 6)},
            }
        )
    bench = tmp_path / "perception_bench.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in records))
    answers = tmp_path / "llava.jsonl"
    answers.write_text(
        "".join(
            json.dumps({"question_id": i, "text": f"I see {i} circles."}) + "\n" for i in range(4)
        )
    )
    env = cli_env(sqlite_url)
    with running_simulator(SimConfig(seed=3)) as sim:
        judges = tmp_path / "judges.yaml"
        judges.write_text(
            f"- spec: openai/prometheus-vision-13b@{sim.openai_base_url}\n"
            "  name: pv\n  protocol: prometheus-vision\n"
        )
        flask_eval(
            "run", "--perception-bench", str(bench), "--responses", f"llava={answers}",
            "--judges", str(judges), "--run", "pb", "--quiet", env=env,
        )  # fmt: skip
        seen = sim.stats()["seen_images"]
    st = json.loads(flask_eval("status", "pb", "--json", env=env).stdout)
    assert st["done"] == st["total"] == 4
    sent = sorted(tuple(i["sha256"] for i in r["images"]) for r in seen)
    assert sent == sorted((hashlib.sha256(d).hexdigest(),) for d in images)
    judged = [json.loads(x) for x in flask_eval("export", "pb", env=env).stdout.splitlines()]
    assert {r["skill"] for r in judged} == {"rubric"}
    assert all(1 <= r["score"] <= 5 for r in judged)
