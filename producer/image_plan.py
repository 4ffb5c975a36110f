"""A run's images against its judges' providers (``core.image_limits``), at plan time:
an image a judge's provider would refuse is bad input naming the instances file, the
line, the judge and the limit, before anything is written."""

from __future__ import annotations

from collections.abc import Sequence

from flask_eval.core.errors import InputError
from flask_eval.core.image_limits import (
    ANTHROPIC_MANY_IMAGES,
    ANTHROPIC_MANY_IMAGES_SIDE,
    ProviderImageLimits,
    base64_size,
    limits_of,
)
from flask_eval.core.images import ImageRef
from flask_eval.core.types import Instance, JudgeConfig

__all__ = ["check_provider_limits"]


def _sent(limits: ProviderImageLimits, ref: ImageRef) -> int:
    return base64_size(ref.size) if limits.base64_bytes else ref.size


def _problem(limits: ProviderImageLimits, refs: Sequence[ImageRef]) -> str | None:
    """What of an instance's images the provider would refuse (None: nothing)."""
    name = limits.provider
    for n, ref in enumerate(refs, 1):
        which = f"image {n} ({ref.media_type}, {ref.width}x{ref.height}, {ref.size:,} bytes)"
        if ref.media_type not in limits.media_types:
            return f"{which}: {name} takes {', '.join(limits.media_types)}"
        sent = _sent(limits, ref)
        if limits.max_image_bytes is not None and sent > limits.max_image_bytes:
            what = "base64 bytes" if limits.base64_bytes else "bytes"
            return (
                f"{which}: {sent:,} {what} sent, over {name}'s limit of "
                f"{limits.max_image_bytes:,} per image"
            )
        side = limits.max_side
        if name == "anthropic" and len(refs) > ANTHROPIC_MANY_IMAGES:
            side = ANTHROPIC_MANY_IMAGES_SIDE
        if side is not None and max(ref.width, ref.height) > side:
            return f"{which}: over {name}'s limit of {side}x{side} pixels"
    if limits.max_images is not None and len(refs) > limits.max_images:
        return f"{len(refs)} images, over {name}'s limit of {limits.max_images} per request"
    total = sum(_sent(limits, r) for r in refs)
    if limits.max_request_bytes is not None and total > limits.max_request_bytes:
        return (
            f"{len(refs)} images of {total:,} bytes sent, over {name}'s limit of "
            f"{limits.max_request_bytes:,} per request"
        )
    return None


def check_provider_limits(
    instances: Sequence[Instance], judges: Sequence[JudgeConfig], path: str
) -> None:
    """InputError (``path``, the instance's line) for the first instance whose images a
    judge's provider refuses; providers without a published table are not checked."""
    tables = [(j, t) for j in judges if (t := limits_of(j.spec)) is not None]
    if not tables:
        return
    for instance in instances:
        if not instance.images:
            continue
        for judge, limits in tables:
            problem = _problem(limits, instance.images)
            if problem is not None:
                raise InputError(
                    f"instance {instance.id}: judge {judge.name}: {problem} "
                    f"(source: {limits.source}, checked {limits.checked})",
                    path or None,
                    instance.line or None,
                )
