"""The instances file `eval` and `annotate` write for their judging step keeps what the
judges are shown: an instance's own rubrics and its images (as data: URIs, byte for
byte), so an image instance is never judged without its image."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from flask_eval.app.annotation import write_instances
from flask_eval.core.images import ImageRef, attached
from flask_eval.producer.loaders import load_instances
from tests.imagegen import bar_chart, encode, text_image


def test_images_and_rubrics_survive_the_written_instances_file(tmp_path: Path) -> None:
    (tmp_path / "chart.png").write_bytes(encode(bar_chart([3, 1, 4]), "PNG"))
    (tmp_path / "word.webp").write_bytes(encode(text_image("seven"), "WEBP"))
    rubric = {"criteria": "Reads the chart", **{str(k): f"level {k}" for k in range(1, 6)}}
    source = tmp_path / "in.jsonl"
    source.write_text(
        json.dumps(
            {
                "idx": "q1",
                "instruction": "Which bar is tallest?",
                "criteria": ["accuracy"],
                "images": ["chart.png", "word.webp"],
                "rubrics": {"accuracy": rubric},
            }
        )
        + "\n"
    )
    (original,) = load_instances(str(source), ["accuracy"], custom_criteria=True)
    out = tmp_path / "elsewhere" / "instances.jsonl"
    out.parent.mkdir()
    write_instances([original], str(out), {}, [], custom=True)
    (again,) = load_instances(str(out), ["accuracy"], custom_criteria=True)
    assert [r.sha256 for r in again.images] == [r.sha256 for r in original.images]
    assert [i.data for i in attached(again.images)] == [i.data for i in attached(original.images)]
    assert again.rubrics == original.rubrics


def test_an_instance_whose_image_bytes_are_gone_is_not_written(tmp_path: Path) -> None:
    (tmp_path / "chart.png").write_bytes(encode(bar_chart([2, 5]), "PNG"))
    source = tmp_path / "in.jsonl"
    record = {"idx": "q1", "instruction": "?", "criteria": ["accuracy"], "images": ["chart.png"]}
    source.write_text(json.dumps(record) + "\n")
    (loaded,) = load_instances(str(source), ["accuracy"], custom_criteria=True)
    plain = replace(loaded, images=tuple(ImageRef.from_data(r.to_data()) for r in loaded.images))
    with pytest.raises(ValueError, match="images' bytes were not read"):
        write_instances([plain], str(tmp_path / "out.jsonl"), {}, [], custom=True)
    assert not (tmp_path / "out.jsonl").exists()
