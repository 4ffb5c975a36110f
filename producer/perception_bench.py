"""Load Prometheus-Vision's Perception-Bench (Lee et al., 2024; Hugging Face
``prometheus-eval/Perception-Bench``, CC-BY-4.0): an image, an instruction about it, a
reference answer and a rubric of its own per record.

Each record (the data set's rows, JSON Lines or a JSON list)::

    image                       a reference (path relative to the file's folder, data: URI,
                                URL when fetching is on), or {"path": ...} or
                                {"bytes": BASE64} as ``datasets`` exports an image column
    instruction                 Prometheus-Vision's filled evaluation prompt (not used: the
                                judge's layout is the protocol's own)
    orig_instruction            what the model was asked about the image
    orig_reference_answer       the reference answer
    orig_criteria, orig_score1_description .. orig_score5_description    the rubric
    id                          optional; else the record's 0-based index

:func:`load_perception_bench` gives one :class:`~core.types.Instance` per record, with
its image (read and checked by ``producer.images``), the reference, and its rubric as the
instance's own criterion :data:`~producer.importing.INSTANCE_CRITERION`, as BiGGen Bench's
instances have. The responses judged are ``--responses NAME=PATH`` (``question_id``: the
instance id). Every problem is one InputError naming the file and the line or record.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from flask_eval.core.errors import InputError
from flask_eval.core.files import open_input
from flask_eval.core.images import ImageRef
from flask_eval.core.jsonl import read_json_lines
from flask_eval.core.spec import RunSpec
from flask_eval.core.text import clip
from flask_eval.core.types import Instance
from flask_eval.producer.images import (
    DEFAULT_MAX_BYTES,
    ImageOptions,
    ImageProblem,
    read_bytes,
    read_image,
)
from flask_eval.producer.importing import (
    INSTANCE_CRITERION,
    MAX_DOCUMENT_BYTES,
    RubricProblem,
    check_identifier,
    json_type,
    parse_rubric,
    read_json_document,
)
from flask_eval.producer.inputs import Inputs, check_response_names
from flask_eval.producer.parallel import load_all_responses
from flask_eval.producer.sources import Loaded, Sources, instance_rubric_skillset, load_sources

__all__ = ["image_options", "load_perception_bench", "load_run_sources", "perception_sources"]

_WHAT = "a Perception-Bench file (JSON Lines, or a JSON list of records)"
_SCORES = tuple(f"orig_score{n}_description" for n in range(1, 6))


def _records(path: str) -> Iterator[tuple[int | None, str, dict[str, Any]]]:
    """(line or None, where, record) per record."""
    with open_input(path, _WHAT) as handle:
        first = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if first == b"[":
        data = read_json_document(path, _WHAT, MAX_DOCUMENT_BYTES)
        if not data:
            raise InputError("no records; expected a JSON list of Perception-Bench records", path)
        for n, value in enumerate(data, 1):
            if not isinstance(value, dict):
                raise InputError(f"record {n}: expected an object, got {json_type(value)}", path)
            yield None, f"record {n}", value
        return
    for line, record in read_json_lines(path, _WHAT):
        yield line, "", record


def _text(record: Mapping[str, Any], key: str, *, empty: bool = False) -> str:
    if key not in record:
        raise RubricProblem(f"missing field {key!r}")
    value = record[key]
    if not isinstance(value, str):
        raise RubricProblem(f"field {key!r} must be a string, got {json_type(value)}")
    if not empty and not value.strip():
        raise RubricProblem(f"field {key!r} is empty")
    return value


def _image(record: Mapping[str, Any], base: Path) -> ImageRef:
    """The record's image: a reference, or ``datasets``' {"path"} / {"bytes"} object."""
    if "image" not in record:
        raise RubricProblem("missing field 'image'")
    value = record["image"]
    try:
        if isinstance(value, Mapping) and isinstance(value.get("bytes"), str):
            try:
                data = base64.b64decode("".join(value["bytes"].split()), validate=True)
            except (binascii.Error, ValueError):
                raise ImageProblem("'bytes' is not valid base64") from None
            return read_bytes(data)
        if isinstance(value, Mapping):
            value = value.get("path")
        if not isinstance(value, str):
            raise RubricProblem(
                "field 'image' must be an image reference (a path, a data: URI or a URL) or "
                f'{{"path": ...}} / {{"bytes": BASE64}}, got {json_type(value)}'
            )
        return read_image(value, base)
    except ImageProblem as exc:
        raise RubricProblem(f"field 'image': {exc}") from None


def _instance(
    iid: str, record: Mapping[str, Any], line: int, base: Path, reference: bool
) -> Instance:
    rubric = parse_rubric(
        {
            "criteria": _text(record, "orig_criteria"),
            **{key.removeprefix("orig_"): _text(record, key) for key in _SCORES},
        }
    )
    has_answer = reference or "orig_reference_answer" in record
    return Instance(
        id=iid,
        instruction=_text(record, "orig_instruction"),
        answer=_text(record, "orig_reference_answer", empty=True) if has_answer else "",
        skills=(INSTANCE_CRITERION,),
        line=line,
        rubrics={INSTANCE_CRITERION: rubric},
        images=(_image(record, base),),
    )


def load_perception_bench(path: str, *, reference: bool = True) -> list[Instance]:
    """Perception-Bench instances in file order, each with its image and rubric."""
    base = Path(path).parent
    instances: list[Instance] = []
    first: dict[str, str] = {}
    for index, (line, where, record) in enumerate(_records(path)):
        try:
            raw = record.get("id", index)
            value = str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else raw
            iid = check_identifier(value, "field 'id'")
            label = where or f"line {line}"
            if iid in first:
                raise RubricProblem(f"instance id {clip(iid)} also on {first[iid]}")
            first[iid] = label
            instances.append(_instance(iid, record, line or 0, base, reference))
        except RubricProblem as exc:
            raise InputError(f"{where}: {exc}" if where else str(exc), path, line) from None
    return instances


def perception_sources(
    path: str, responses: Sequence[tuple[str, str]], reference: bool = True
) -> Loaded:
    """A Perception-Bench file's instances, judged on their own rubrics, with the
    responses of ``--responses``."""
    instances = load_perception_bench(path, reference=reference)
    if not responses:
        raise InputError(
            f"--perception-bench {path}: the file carries no responses; add --responses "
            "NAME=PATH (JSON Lines: question_id, text)"
        )
    check_response_names(responses)
    sets = load_all_responses(responses, {i.id: i.id for i in instances})
    return Loaded(Inputs(tuple(instances), tuple(sets)), instance_rubric_skillset())


def image_options(spec: RunSpec) -> ImageOptions:
    """How the run's images are read (``producer.images``): URLs fetched only with
    ``--fetch-images`` and from ``--image-hosts``; the size limit."""
    src = spec.inputs
    if src.image_hosts and not src.fetch_images:
        raise InputError("--image-hosts goes with --fetch-images")
    if src.fetch_images and not src.image_hosts:
        raise InputError(
            "--fetch-images needs --image-hosts HOST,...: the hosts images are fetched from"
        )
    mb = src.max_image_mb
    limit = DEFAULT_MAX_BYTES if mb is None else max(1, int(mb * (1 << 20)))
    return ImageOptions(src.fetch_images, src.image_hosts, max_bytes=limit)


def load_run_sources(sources: Sources, path: str | None) -> Loaded:
    """The run's inputs: a Perception-Bench file (``--perception-bench``), or the other
    sources (``producer.sources``); ``path``: the ``--perception-bench`` file."""
    if path is None:
        return load_sources(sources)
    if sources.path:
        raise InputError(
            "give exactly one of --instances, --biggen, --multifaceted, --prometheus-set, "
            "--pairwise-set and --perception-bench"
        )
    if sources.rubrics or sources.criteria or sources.models:
        raise InputError(
            "--perception-bench FILE carries a rubric per instance and takes --responses "
            "NAME=PATH: no --rubrics, --criteria or --model"
        )
    return perception_sources(path, sources.responses, sources.reference)
