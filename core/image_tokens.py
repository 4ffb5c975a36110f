"""How many prompt tokens an image costs, by each provider's published rule (pure).

:func:`image_tokens` answers for one image of ``width`` x ``height`` pixels sent to
``provider``'s ``model``. The estimates (``producer.estimate``) count it into a call's
prompt tokens and the judge simulator (``simulator.images``) bills it, so a dry run and
the simulator agree. Each rule below names its source and the day it was read; the
providers change them with new models, so a model the tables do not name gets its
provider's default rule (the one noted), never an error.

OpenAI (https://platform.openai.com/docs/guides/images-vision, "Calculating costs",
read 2026-12; the worked examples below are the guide's):

- *Tile models* (GPT-4o, GPT-4.1, GPT-4.5, GPT-5, o1/o3 and the default for an OpenAI
  model the table does not name): ``detail`` low costs the base tokens; high (and
  auto, which the guide treats as high for billing) scales the image to fit in
  2048 x 2048, then so that its shortest side is at most 768 px, and adds the tile tokens
  per 512-px tile covering it. Base/tile tokens: 85/170 (gpt-4o, gpt-4.1, gpt-4.5),
  70/140 (gpt-5, gpt-5.x), 75/150 (o1, o3), 2833/5667 (gpt-4o-mini: the same price as
  gpt-4o at its lower rate), 65/129 (computer-use-preview). 1024 x 1024 high: 765 tokens;
  2048 x 4096 high: 1105 tokens.
- *Patch models* (gpt-4.1-mini, gpt-4.1-nano, gpt-5-mini, gpt-5-nano, o4-mini): one
  token per 32 x 32 patch covering the image, at most 1536 patches (a larger image is
  scaled down to fit, the width to a whole number of patches), times the model's
  multiplier: 1.62 (gpt-4.1-mini, gpt-5-mini), 2.46 (gpt-4.1-nano, gpt-5-nano), 1.72
  (o4-mini); rounded up. ``detail`` does not change it. 1024 x 1024: 1024 patches;
  1800 x 2400: 1452 patches. (Users measured gpt-5-mini at about 1.2 tokens a patch in
  2026, below the guide's 1.62; the guide's figure is kept: an estimate errs high.)

Anthropic (https://platform.claude.com/docs/en/build-with-claude/vision, "Evaluate image
size" and "Calculate image costs", read 2026-12): an image whose long edge exceeds 1568 px,
or which exceeds about 1,600 tokens (1.2 megapixels), is first scaled down, keeping its
aspect ratio; it then costs ``width * height / 750`` tokens (rounded up: the guide's
table gives 200 x 200 ~54, 1000 x 1000 ~1334, 1092 x 1092 ~1590). Claude Opus 4.7 and
later read images up to 2576 px on the long edge and count 28 x 28 patches
(``ceil(w/28) * ceil(h/28)``, at most 4784): the same page, read 2026-12, for those
models (:data:`ANTHROPIC_PATCH_MODELS`).

Gemini (https://ai.google.dev/gemini-api/docs/tokens, "Multimodal tokens", and
https://ai.google.dev/gemini-api/docs/media-resolution, read 2026-12): up to Gemini 2.5,
an image with both sides at most 384 px costs 258 tokens; a larger one is cropped and
scaled into 768 x 768 tiles, 258 tokens each. Gemini 3 models take ``media_resolution``
and default to high for images: 1120 tokens an image (low 280, medium 560, ultra high
2240), whatever its size.

A provider other than these three (an OpenAI-compatible server) is counted by OpenAI's
tile rule at 85/170: such servers bill their own way, and this is an upper-ish guess.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = [
    "ANTHROPIC_PATCH_MODELS",
    "GEMINI_3_TOKENS",
    "OpenAIRule",
    "anthropic_tokens",
    "gemini_tokens",
    "image_tokens",
    "openai_rule",
    "openai_tokens",
]


@dataclass(frozen=True)
class OpenAIRule:
    """How an OpenAI model counts an image: by 512-px tiles (``base`` + ``tile`` per
    tile, ``base`` alone at low detail) or, with a ``multiplier``, by 32-px patches."""

    base: int = 85
    tile: int = 170
    multiplier: float | None = None


#: model-name patterns (matched at the start of the name; the longest match wins) and
#: their rule, from OpenAI's guide (the module docstring)
_OPENAI_RULES: dict[str, OpenAIRule] = {
    "gpt-4o": OpenAIRule(85, 170),
    "gpt-4o-mini": OpenAIRule(2833, 5667),
    "gpt-4.1": OpenAIRule(85, 170),
    "gpt-4.1-mini": OpenAIRule(multiplier=1.62),
    "gpt-4.1-nano": OpenAIRule(multiplier=2.46),
    "gpt-4.5": OpenAIRule(85, 170),
    "gpt-5": OpenAIRule(70, 140),
    "gpt-5-mini": OpenAIRule(multiplier=1.62),
    "gpt-5-nano": OpenAIRule(multiplier=2.46),
    "o1": OpenAIRule(75, 150),
    "o3": OpenAIRule(75, 150),
    "o4-mini": OpenAIRule(multiplier=1.72),
    "computer-use-preview": OpenAIRule(65, 129),
}
_DEFAULT_OPENAI = OpenAIRule(85, 170)
PATCH_SIDE = 32
MAX_PATCHES = 1536

ANTHROPIC_LONG_EDGE = 1568
#: ~1,600 tokens: the guide's size past which an image is scaled down
ANTHROPIC_MAX_PIXELS = 1_200_000
ANTHROPIC_PIXELS_PER_TOKEN = 750
#: Claude models that read images by 28-px patches, up to 2576 px on the long edge
ANTHROPIC_PATCH_MODELS = re.compile(r"claude-(opus-4-[7-9]|opus-[5-9]|sonnet-[5-9]|haiku-[5-9])")
ANTHROPIC_PATCH_LONG_EDGE = 2576
ANTHROPIC_PATCH_SIDE = 28
ANTHROPIC_MAX_PATCH_TOKENS = 4784

GEMINI_SMALL_SIDE = 384
GEMINI_TILE_SIDE = 768
GEMINI_TILE_TOKENS = 258
#: an image's tokens on Gemini 3 at its default (high) media resolution
GEMINI_3_TOKENS = 1120
_GEMINI_3 = re.compile(r"gemini-3(?![0-9])")


def _bare(model: str) -> str:
    """``model`` without a ``provider/`` or ``models/`` prefix."""
    return model.rsplit("/", 1)[-1]


def openai_rule(model: str) -> OpenAIRule:
    """The rule of an OpenAI ``model``: the longest pattern of the table it starts
    with, else the default tile rule (85/170)."""
    name = _bare(model)
    best = ""
    for prefix in _OPENAI_RULES:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return _OPENAI_RULES[best] if best else _DEFAULT_OPENAI


def _scaled(width: int, height: int, factor: float) -> tuple[float, float]:
    return (width * factor, height * factor) if factor < 1 else (float(width), float(height))


def _patches(width: int, height: int) -> int:
    """OpenAI's 32-px patches covering the image, after its scaling to 1536 patches."""
    count = math.ceil(width / PATCH_SIDE) * math.ceil(height / PATCH_SIDE)
    if count <= MAX_PATCHES:
        return count
    shrink = math.sqrt(MAX_PATCHES * PATCH_SIDE**2 / (width * height))
    w, h = width * shrink, height * shrink
    fit = math.floor(w / PATCH_SIDE) / (w / PATCH_SIDE)  # the width to whole patches
    w, h = w * fit, h * fit
    return min(MAX_PATCHES, _cover(w, PATCH_SIDE) * _cover(h, PATCH_SIDE))


def _cover(length: float, side: int) -> int:
    """Squares of ``side`` covering ``length`` (a float from scaling: 1408.0000001 is
    1408)."""
    return math.ceil(length / side - 1e-6)


def openai_tokens(model: str, width: int, height: int, detail: str = "auto") -> int:
    """An image's tokens on an OpenAI ``model`` at ``detail`` (low, high or auto)."""
    rule = openai_rule(model)
    if rule.multiplier is not None:
        return math.ceil(_patches(width, height) * rule.multiplier - 1e-9)
    if detail == "low":
        return rule.base
    w, h = _scaled(width, height, min(2048 / width, 2048 / height))
    w, h = _scaled(round(w), round(h), 768 / min(w, h))
    tiles = math.ceil(round(w) / 512) * math.ceil(round(h) / 512)
    return rule.base + rule.tile * tiles


def anthropic_tokens(model: str, width: int, height: int) -> int:
    """An image's tokens on a Claude ``model``."""
    if ANTHROPIC_PATCH_MODELS.search(_bare(model)):
        w, h = _scaled(width, height, ANTHROPIC_PATCH_LONG_EDGE / max(width, height))
        side = ANTHROPIC_PATCH_SIDE
        count = math.ceil(math.floor(w) / side) * math.ceil(math.floor(h) / side)
        return min(count, ANTHROPIC_MAX_PATCH_TOKENS)
    factor = min(
        ANTHROPIC_LONG_EDGE / max(width, height),
        math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)),
    )
    w, h = _scaled(width, height, factor)
    pixels = math.floor(w) * math.floor(h)
    return max(1, math.ceil(pixels / ANTHROPIC_PIXELS_PER_TOKEN))


def gemini_tokens(model: str, width: int, height: int) -> int:
    """An image's tokens on a Gemini ``model`` (at its default media resolution)."""
    if _GEMINI_3.search(_bare(model)):
        return GEMINI_3_TOKENS
    if width <= GEMINI_SMALL_SIDE and height <= GEMINI_SMALL_SIDE:
        return GEMINI_TILE_TOKENS
    tiles = math.ceil(width / GEMINI_TILE_SIDE) * math.ceil(height / GEMINI_TILE_SIDE)
    return GEMINI_TILE_TOKENS * tiles


def image_tokens(provider: str, model: str, width: int, height: int, detail: str = "auto") -> int:
    """The prompt tokens of one ``width`` x ``height`` image sent to ``provider``'s
    ``model`` (the module docstring gives each rule and its source); ``detail`` is
    OpenAI's (low, high, auto) and ignored elsewhere. ValueError on a size below 1 px."""
    if width < 1 or height < 1:
        raise ValueError(f"an image has at least 1 x 1 pixels, not {width} x {height}")
    if provider == "anthropic":
        return anthropic_tokens(model, width, height)
    if provider == "gemini":
        return gemini_tokens(model, width, height)
    if provider == "openai":
        return openai_tokens(model, width, height, detail)
    return openai_tokens("", width, height, detail)
