"""``recorded:auto-j-13b``: a judge replaying Auto-J-13B's recorded verdicts through a run
of Auto-J's set (the in-process simulator's replay table), its figures read from the run's
ledger; bad recorded predictions are refused before the store is opened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flask_eval.app.judge_eval import JudgeEvalConfig, judge_eval
from flask_eval.core.errors import InputError
from flask_eval.core.settings import load as load_settings
from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND, VERDICT_TIE
from flask_eval.storage import analytics
from flask_eval.storage.store import Store
from tests.report.test_meta_eval import no_store

#: (response 1, response 2, label, listed output, swapped output): output 0 is the
#: response shown first (in the swapped file, response 2), 1 the second, 2 a tie
RECORDS = [
    ("Paris is the capital.", "It is Lyon.", 0, 0, 1),  # right in both orders
    ("Two plus two is five.", "Four.", 1, 0, 0),  # the listed order wrong, swapped right
    ("Hello there.", "Hi!", 2, 2, 2),  # a tie, recorded as one
]


def files(tmp_path: Path, swapped: list[int] | None = None) -> list[str]:
    data = tmp_path / "autoj_pairwise.json"
    data.write_text(
        "\n".join(
            json.dumps({"prompt": f"Q{n}", "response 1": a, "response 2": b, "label": g})
            for n, (a, b, g, _, _) in enumerate(RECORDS)
        )
    )
    listed, exchange = tmp_path / "listed.jsonl", tmp_path / "exchange.jsonl"
    outputs = swapped if swapped is not None else [r[4] for r in RECORDS]
    listed.write_text("\n".join(json.dumps({"output": r[3]}) for r in RECORDS))
    exchange.write_text("\n".join(json.dumps({"output": o}) for o in outputs))
    return [str(data), str(listed), str(exchange)]


def config(paths: list[str]) -> JudgeEvalConfig:
    data, listed, exchange = paths
    return JudgeEvalConfig(
        "recorded:auto-j-13b",
        sets=("autoj",),
        files={"autoj": data, "autoj-output": listed, "autoj-exchange-output": exchange},
    )


def test_the_recorded_verdicts_are_judged_through_a_run(tmp_path: Path, sqlite_url: str) -> None:
    rows = judge_eval(config(files(tmp_path)), load_settings(), lambda: Store(sqlite_url), tmp_path)
    m = rows[0].metrics
    assert rows[0].judge == "auto-j-13b"
    assert m["listed"].value == pytest.approx(2 / 3) and m["listed"].n == 3
    store = Store(sqlite_url)
    try:
        run = store.find_run()
        assert run is not None
        done = analytics.pairwise_rows(store, run.id).done
    finally:
        store.close()
    position = {0: VERDICT_FIRST, 1: VERDICT_SECOND, 2: VERDICT_TIE}
    # instance, the model shown first, the verdict by position: the recorded one
    got = sorted((row[0], row[1], row[5]) for row in done)
    want = sorted(
        [(f"autoj-{n + 1}", "response-1", position[r[3]]) for n, r in enumerate(RECORDS)]
        + [(f"autoj-{n + 1}", "response-2", position[r[4]]) for n, r in enumerate(RECORDS)]
    )
    assert got == want


def test_bad_recorded_predictions_are_refused_before_the_store(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="2 predictions for 3 comparisons"):
        judge_eval(
            config(files(tmp_path, swapped=[0, 1])),
            load_settings(),
            no_store,  # type: ignore[arg-type]
            tmp_path,
        )
