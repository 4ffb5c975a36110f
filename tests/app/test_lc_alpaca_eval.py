"""The length-controlled win rate is the figure AlpacaEval's own
``get_length_controlled_winrate`` gives (alpaca-eval 0.6.6, installed by scripts/test):
a pairwise run, its export turned into AlpacaEval's annotations, the package's function
against the report's JSON.

The package is imported without its ``__init__`` (which loads its command line, model
clients and tokenizers), and two of its imports get stand-ins: ``datasets`` (only its
data loaders use it) and ``huggingface_hub``'s download, which would fetch AlpacaEval's
per-instruction data over the network; the stand-in serves a table for our instances
(the minimal formula does not use its values).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import types
import warnings
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flask_eval.core.types import VERDICT_FIRST, VERDICT_SECOND
from tests.app.test_pairwise_e2e import pairwise_run_of_the_examples
from tests.conftest import EXAMPLES, _unavailable


@pytest.fixture
def forget_alpaca_eval() -> Iterator[None]:
    """The package's modules, loaded with stand-ins, are not left to other tests."""
    yield
    for name in [m for m in sys.modules if m.startswith("alpaca_eval.")]:
        del sys.modules[name]


def _glm_winrate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    pd = (
        pytest.importorskip("pandas")
        if not os.environ.get("CI")
        else importlib.import_module("pandas")
    )
    spec = importlib.util.find_spec("alpaca_eval")
    if spec is None or spec.origin is None:
        _unavailable("alpaca-eval (scripts/test installs it)", ModuleNotFoundError("alpaca_eval"))
    assert spec is not None and spec.origin is not None
    package = types.ModuleType("alpaca_eval")
    package.__path__ = [os.path.dirname(spec.origin)]
    datasets = types.ModuleType("datasets")
    datasets.Dataset = type("Dataset", (), {})  # type: ignore[attr-defined]
    hub = types.ModuleType("huggingface_hub")

    def hf_hub_download(repo_id: str, filename: str, **_: Any) -> str:
        path = tmp_path / filename
        pd.DataFrame({"index": range(10_000), "instruction_difficulty": 0.0, "model": ""}).to_csv(
            path, index=False
        )
        return str(path)

    hub.hf_hub_download = hf_hub_download  # type: ignore[attr-defined]
    for name in [m for m in sys.modules if m == "alpaca_eval" or m.startswith("alpaca_eval.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "alpaca_eval", package)
    monkeypatch.setitem(sys.modules, "datasets", sys.modules.get("datasets", datasets))
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub)
    return importlib.import_module("alpaca_eval.metrics.glm_winrate")


def _texts(path: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {str(r["question_id"]): r["text"] for r in rows}


@pytest.mark.e2e
def test_lc_win_rate_equals_alpaca_evals_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget_alpaca_eval: None
) -> None:
    from click.testing import CliRunner

    from flask_eval.cli import main

    glm = _glm_winrate(tmp_path, monkeypatch)
    env = pairwise_run_of_the_examples(tmp_path, seed=9)
    exported = CliRunner().invoke(main, ["export", "lc"], env=env)
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(x) for x in exported.stdout.splitlines() if x.strip()]
    report = CliRunner().invoke(main, ["report", "lc", "--format", "json", "--quiet"], env=env)
    doc = json.loads(report.stdout)
    ours = {(r["dimension"], r["key"]): r["mean"] for r in doc["rows"]}

    # the export's verdicts, both orders of a comparison combined as the report documents
    # (agreeing orders keep their verdict, disagreeing ones make a tie)
    orders: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if r["status"] != "done":
            continue
        winner = {VERDICT_FIRST: r["model"], VERDICT_SECOND: r["model_b"]}.get(r["score"])
        orders[(r["instance_id"], r["skill"])].append(
            1.0 if winner == "model_b" else 0.0 if winner == "model_a" else 0.5
        )
    anchor, model = _texts(EXAMPLES / "model_a.jsonl"), _texts(EXAMPLES / "model_b.jsonl")
    annotations = []
    for (iid, _criterion), ys in sorted(orders.items()):
        y = ys[0] if len(set(ys)) == 1 else 0.5
        annotations.append(
            {
                "instruction": iid,
                "index": len(annotations),
                "output_1": anchor[iid],
                "output_2": model[iid],
                "generator_1": "model_a",
                "generator_2": "model_b",
                "annotator": "sim",
                "preference": 1.5 if y == 0.5 else 1.0 + y,
            }
        )
    assert len(annotations) >= 20
    frame = importlib.import_module("pandas").DataFrame(annotations)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = glm.get_length_controlled_winrate(
            frame, glm_name="length_controlled_minimal", save_weights_dir=None
        )
    assert ours[("length_controlled", "model_b")] == pytest.approx(
        theirs["length_controlled_winrate"] / 100, abs=1e-9
    )
    assert ours[("length_controlled", "model_a")] == 0.5  # the anchor
    assert ("length_controlled_unpenalized", "model_b") in ours
