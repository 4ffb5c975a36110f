"""A 10M-judgment dry run in seconds (issue 24): responses files validated in parallel
processes, calls counted from the texts' lengths, only the sampled texts read again, the
fingerprint computed when first asked. Each gives what the one-process, read-everything
path gives."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from flask_eval.app import pipeline
from flask_eval.core.errors import InputError
from flask_eval.core.spec import run_spec
from flask_eval.core.types import Price
from flask_eval.producer import parallel
from flask_eval.producer.estimate import CallTexts
from flask_eval.producer.responses import FileResponses, load_responses
from flask_eval.producer.sampling import CallSampler
from flask_eval.producer.synthetic import write_inputs
from flask_eval.storage.records import PlannedCall

pytestmark = pytest.mark.unit

MODELS = tuple(f"m{k}" for k in range(10))  # more files than parallel.MIN_FILES


def named(responses: list[str]) -> list[tuple[str, str]]:
    return [tuple(a.split("=", 1)) for a in responses]  # type: ignore[misc]


# run in a process of its own: a test process may have threads left by other tests, beside
# which the producer never forks
CHECK = """
import json, sys
from flask_eval.core.errors import InputError
from flask_eval.producer import parallel
from flask_eval.producer.responses import load_responses
files, ids = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ids = {k: k for k in ids}
if sys.argv[3:] == ["kill"]:  # a child dies on the third file (the kernel's OOM killer)
    import os
    validate = parallel._validate

    def dies(job):
        if job[1] == files[2][1]:
            os._exit(9)
        return validate(job)

    parallel._validate = dies
assert parallel._can_fork() and len(files) >= parallel.MIN_FILES
try:
    together = parallel.load_all_responses([tuple(f) for f in files], ids)
except InputError as exc:
    together = str(exc)
try:
    alone = [load_responses(name, path, ids) for name, path in files]
except InputError as exc:
    alone = str(exc)
if isinstance(together, str) or isinstance(alone, str):
    print(json.dumps({"together": str(together)[:300], "alone": str(alone)[:300]}))
    sys.exit()
same = []
for one, other in zip(together, alone, strict=True):
    a, b = one.responses, other.responses
    same.append((a.model, a.path, a.ids, a.stamp, list(a.lengths), list(a), a.keep, a.unknown)
                == (b.model, b.path, b.ids, b.stamp, list(b.lengths), list(b), b.keep, b.unknown))
    # the instances' own strings, not copies
    same.append(all(x is ids[x] for x in a.instance_ids()))
print(json.dumps({"same": same}))
"""


def in_parallel(files: list[tuple[str, str]], ids: list[str], *how: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(files), json.dumps(ids), *how],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_files_validated_in_parallel_are_what_one_process_makes(tmp_path: Path) -> None:
    _, responses = write_inputs(tmp_path, 40, models=MODELS, words=(1, 30))
    got = in_parallel(named(responses), [str(i) for i in range(1, 41)])
    assert got == {"same": [True] * 2 * len(MODELS)}


def test_a_hand_picked_subset_of_instances_in_parallel(tmp_path: Path) -> None:
    """Full responses files with a subset of the instances: the responses to the others
    are left out, in the children as in one process."""
    _, responses = write_inputs(tmp_path, 30, models=MODELS)
    picked = [str(i) for i in range(1, 31) if i % 3]
    got = in_parallel(named(responses), picked)
    assert got == {"same": [True] * 2 * len(MODELS)}


def test_a_child_killed_leaves_the_files_to_this_process(tmp_path: Path) -> None:
    _, responses = write_inputs(tmp_path, 30, models=MODELS)
    got = in_parallel(named(responses), [str(i) for i in range(1, 31)], "kill")
    assert got == {"same": [True] * 2 * len(MODELS)}


def test_the_first_bad_file_in_order_is_the_one_named(tmp_path: Path) -> None:
    _, responses = write_inputs(tmp_path, 20, models=MODELS)
    files = named(responses)
    for k, line in ((7, 5), (2, 11)):  # two bad files: the earlier one is named
        path = Path(files[k][1])
        rows = path.read_text().splitlines()
        rows[line - 1] = json.dumps({"question_id": 1, "text": "x"})
        path.write_text("\n".join(rows) + "\n")
    got = in_parallel(files, [str(i) for i in range(1, 21)])
    assert got["together"].startswith(f"{files[2][1]}:11: duplicate response for instance '1'")
    assert got["together"] == got["alone"]


def test_no_fork_beside_another_thread_or_in_a_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not parallel._can_fork()
    finally:
        stop.set()
        other.join()
    monkeypatch.setattr(parallel.multiprocessing.current_process(), "daemon", True)
    assert not parallel._can_fork()


def test_sampled_calls_counted_from_lengths_are_those_the_texts_give(tmp_path: Path) -> None:
    """The streamed count (lengths only, sampled texts read afterwards) makes the same
    sample and the same figures as adding every call with its texts, in plan order."""
    instances, responses = write_inputs(tmp_path, 300, models=MODELS[:3], words=(5, 200))
    base = pipeline.prepare(
        run_spec(
            instances=str(instances),
            responses=responses,
            judges=["memory/a", "memory/b"],
            run_name="s",
        )
    )
    plan = replace(base, judges=tuple(replace(j, price=Price(3.0, 15.0)) for j in base.judges))
    context = plan.context()
    counted = plan.sampled(size=4)
    added = CallSampler(context, size=4)
    items = {i.id: i for i in plan.inputs.instances}
    for rs in plan.inputs.response_sets:
        for r in rs.responses:
            i = items[r.instance_id]
            texts = CallTexts(i.instruction, i.answer, r.text, None, i.system_prompt, i.rubrics)
            for judge in context.judges:
                for part in context.protocol_for(judge).calls(list(i.skills)):
                    added.add(PlannedCall([], rs.model, i.id, judge, list(part)), texts)
    assert sorted(map(repr, counted.sampled_calls())) == sorted(map(repr, added.sampled_calls()))
    one, other = counted.summarize(), added.summarize()
    assert [vars(e) for e in one] == [vars(e) for e in other]
    assert any(e.sampled_groups for e in one)  # groups larger than their sample


def test_sampled_texts_are_read_again_and_a_changed_file_is_refused(tmp_path: Path) -> None:
    _, responses = write_inputs(tmp_path, 30, models=("m1",))
    name, path = named(responses)[0]
    source = load_responses(name, path, [str(i) for i in range(1, 31)]).responses
    assert isinstance(source, FileResponses)
    every = {r.instance_id: r.text for r in source}
    assert source.texts({"3", "17"}) == {"3": every["3"], "17": every["17"]}
    assert [(i, n) for i, n in source.sizes()] == [(i, len(every[i])) for i in source.ids]
    with open(path, "a") as f:
        f.write(json.dumps({"question_id": 31, "text": "late"}) + "\n")
    with pytest.raises(InputError, match="changed after it was validated"):
        source.texts({"3"})


def test_the_fingerprint_of_a_named_run_is_computed_when_first_asked(tmp_path: Path) -> None:
    instances, responses = write_inputs(tmp_path, 10, models=("m1", "m2"))
    named_plan = pipeline.prepare(
        run_spec(
            instances=str(instances), responses=responses, judges=["memory/a"], run_name="later"
        )
    )
    unnamed = pipeline.prepare(
        run_spec(instances=str(instances), responses=responses, judges=["memory/a"])
    )
    assert callable(named_plan.digest) and isinstance(unnamed.digest, str)
    assert unnamed.name == f"run-{unnamed.digest[:10]}"
    assert named_plan.fingerprint == unnamed.fingerprint == unnamed.digest
    again = pipeline.prepare(
        run_spec(
            instances=str(instances), responses=responses, judges=["memory/a"], run_name="later"
        )
    )
    with open(named(responses)[1][1], "a") as f:  # changed before it is fingerprinted
        f.write(json.dumps({"question_id": 1, "text": "again"}) + "\n")
    with pytest.raises(InputError, match="changed after it was validated"):
        again.fingerprint  # noqa: B018
