"""The kinds' registry (rubrics/kinds.py): every plug-in loads as the kind it is named,
its protocol does its kind's work, and generic code's questions (what a report says, who
does the work, whether the export is the judgments' own) have the answers the built-in
kinds always had."""

from __future__ import annotations

import pytest

from flask_eval.rubrics import kinds
from flask_eval.rubrics.kind import INSTANCE, RESPONSE, as_json


@pytest.mark.parametrize("name", list(kinds.KINDS))
def test_every_plugin_is_the_kind_it_is_named(name: str) -> None:
    kind = kinds.kind(name)
    assert kind.name == name and kinds.of(name) is kind and kinds.known(name)
    protocol = kind.protocol("instance", {})
    assert protocol.kind == name and not kind.scores
    criteria = kind.criteria({})
    assert criteria.names and kind.words.worker and kind.words.holds and kind.words.doing
    assert kind.subject in (INSTANCE, RESPONSE)


def test_judgment_is_described_alike_but_is_no_plugin() -> None:
    judging = kinds.of(kinds.JUDGMENT)
    assert judging is kinds.JUDGING and kinds.JUDGMENT not in kinds.KINDS
    assert judging.scores and judging.words.worker == "judge" and judging.subject == RESPONSE
    assert kinds.known(kinds.JUDGMENT) and not kinds.known("nonsense")
    with pytest.raises(KeyError, match="unknown kind of work 'nonsense'; known: generation"):
        kinds.kind("nonsense")


def test_the_built_in_kinds_keep_their_words_messages_and_exports() -> None:
    generation, annotation = kinds.kind("generation"), kinds.kind("annotation")
    assert generation.refusal("g") == (
        "run g is a generation run: it has no scores to report; `generate --run` writes "
        "what it produced"
    )
    assert annotation.refusal("a").endswith("`annotate --run` writes what it produced")
    assert (generation.noun, annotation.noun) == ("responses", "labels")
    assert (generation.words.doing, annotation.words.doing) == ("generating", "annotating")
    assert generation.workers_tested and not annotation.workers_tested
    # the judgments' rows, the worker named in the kind's words and no model (none)
    row = {"run": "r", "model": "", "judge": "w", "instance_id": "1", "raw": "x", "value": "x"}
    assert generation.export is not None and annotation.export is not None
    assert list(generation.export(row).items()) == [
        ("run", "r"),
        ("model", "w"),
        ("instance_id", "1"),
        ("raw", "x"),
    ]
    assert list(annotation.export(row)) == ["run", "annotator", "instance_id", "raw"]
    assert annotation.view is as_json and annotation.view('{"a": [1]}') == '{\n "a": [\n  1\n ]\n}'
    assert generation.subject == annotation.subject == INSTANCE
