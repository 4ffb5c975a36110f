"""Each provider's image-token rule against the worked examples of its own docs."""

from __future__ import annotations

import pytest

from flask_eval.core.image_tokens import image_tokens, openai_rule


@pytest.mark.parametrize(
    ("width", "height", "detail", "tokens"),
    [
        (1024, 1024, "high", 765),  # OpenAI's guide: 4 tiles after scaling to 768 x 768
        (2048, 4096, "high", 1105),  # 1024 x 2048, then 768 x 1536: 6 tiles
        (2048, 4096, "auto", 1105),
        (4096, 8192, "low", 85),  # low detail: the base tokens alone
        (100, 100, "high", 255),  # one tile, no upscaling
        (513, 500, "high", 425),  # two tiles
    ],
)
def test_openai_tile_rule_matches_the_guide(
    width: int, height: int, detail: str, tokens: int
) -> None:
    assert image_tokens("openai", "gpt-4o", width, height, detail) == tokens
    assert image_tokens("openai", "gpt-4.1-2025-04-14", width, height, detail) == tokens


def test_openai_model_families_have_their_own_base_and_tile_tokens() -> None:
    assert image_tokens("openai", "gpt-4o-mini", 1024, 1024, "high") == 2833 + 4 * 5667
    assert image_tokens("openai", "gpt-4o-mini", 1024, 1024, "low") == 2833
    assert image_tokens("openai", "gpt-5", 1024, 1024) == 70 + 4 * 140
    assert image_tokens("openai", "gpt-5.5", 1024, 1024) == 70 + 4 * 140
    assert image_tokens("openai", "o3", 1024, 1024) == 75 + 4 * 150
    # a model the table does not name: the default tile rule
    assert image_tokens("openai", "some-new-model", 1024, 1024) == 765


def test_openai_patch_rule_matches_the_guide() -> None:
    assert openai_rule("gpt-4.1-mini").multiplier == 1.62
    # 1024 x 1024: 32 x 32 patches = 1024, times 1.62, rounded up
    assert image_tokens("openai", "gpt-4.1-mini", 1024, 1024) == 1659
    # 1800 x 2400: 4275 patches, scaled to 1056 x 1408 = 33 x 44 = 1452 patches
    assert image_tokens("openai", "gpt-4.1-mini", 1800, 2400) == 2353  # ceil(1452 * 1.62)
    assert image_tokens("openai", "gpt-4.1-nano", 1800, 2400) == 3572  # ceil(1452 * 2.46)
    assert image_tokens("openai", "o4-mini", 1024, 1024) == 1762  # ceil(1024 * 1.72)
    # detail does not change a patch model's count; a huge image stays within 1536 patches
    assert image_tokens("openai", "gpt-5-mini", 1024, 1024, "low") == 1659
    assert image_tokens("openai", "gpt-5-nano", 20000, 20000) <= 1536 * 2.46 + 1


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (200, 200, 54),  # the guide's table: ~54
        (1000, 1000, 1334),  # ~1334
        (1092, 1092, 1590),  # ~1590
        (4000, 4000, 1590),  # scaled down to ~1.2 MP first
    ],
)
def test_anthropic_rule_matches_the_guide(width: int, height: int, tokens: int) -> None:
    got = image_tokens("anthropic", "claude-sonnet-4-5", width, height)
    assert abs(got - tokens) <= 12  # the guide's figures are approximate ("~")
    if width <= 1092:
        assert got == tokens


def test_anthropic_long_edge_is_1568_and_tokens_stay_near_1600() -> None:
    # 784 x 1568 is the 1:2 size the guide lists as not resized; past it, scaled down
    assert image_tokens("anthropic", "claude-haiku-4-5", 3000, 200) == 1568 * 104 // 750 + 1
    assert image_tokens("anthropic", "claude-opus-4-5", 8000, 8000) <= 1600
    # newer models count 28-px patches up to 2576 px
    assert image_tokens("anthropic", "claude-opus-4-7", 1000, 1000) == 36 * 36
    assert image_tokens("anthropic", "claude-opus-4-7", 8000, 8000) == 4784


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (384, 384, 258),  # both sides <= 384: one image token block
        (384, 300, 258),
        (385, 100, 258),  # one 768 tile
        (1600, 900, 258 * 3 * 2),  # 3 x 2 tiles of 768
        (768, 768, 258),
        (769, 768, 516),
    ],
)
def test_gemini_rule(width: int, height: int, tokens: int) -> None:
    assert image_tokens("gemini", "gemini-2.5-flash", width, height) == tokens


def test_gemini_3_counts_its_default_media_resolution() -> None:
    assert image_tokens("gemini", "gemini-3-pro-preview", 64, 64) == 1120
    assert image_tokens("gemini", "models/gemini-3-flash", 4000, 3000) == 1120


def test_a_size_below_one_pixel_is_refused() -> None:
    with pytest.raises(ValueError, match="1 x 1"):
        image_tokens("openai", "gpt-4o", 0, 10)
