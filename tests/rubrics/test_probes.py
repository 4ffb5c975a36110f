"""The probes' twins of a response: padding, restyling, injections, and the canonical
text every twin shares with its original, raw and as a protocol's prompt shows it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flask_eval.rubrics.grading import PROTOCOLS, Subject, protocol
from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.pairwise import PAIRWISE_PROTOCOLS, pairwise_protocol
from flask_eval.rubrics.probes import (
    FILLERS,
    INSTRUCTION,
    canonical,
    carries_injection,
    inject,
    injection_score,
    injections_in,
    pad,
    restyle,
    word_count,
)
from flask_eval.rubrics.skills import load_default
from flask_eval.simulator.quality import word_count as sim_word_count

TEXT = (
    "Paris is the capital of France. It has about two million people!\n\n"
    "Is it old? Yes, it was founded over two thousand years ago"
)
CLAIMS = [injection_score(n) for n in PROTOCOLS] + [
    injection_score(n, pairwise=True) for n in PAIRWISE_PROTOCOLS
]
INJECTIONS = [*CLAIMS, INSTRUCTION]
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300) | st.lists(
    st.sampled_from(["word", "Two.", "- ", "#", "##", "\n\n", " ", "[RESULT]", "5", "ok?"]),
    max_size=40,
).map("".join)


def test_padding_reaches_the_percentage_and_overshoots_by_one_filler_at_most() -> None:
    words = word_count(TEXT)
    for percent in (25, 50, 100):
        padded = pad(TEXT, percent)
        assert padded.startswith(TEXT)
        target = words * (1 + percent / 100)
        assert word_count(padded) >= target
        longest = max(word_count(f) for f in FILLERS)
        assert word_count(padded) < target + longest
        assert padded[len(TEXT) :].startswith("\n\n")  # a final paragraph of its own
    assert pad(TEXT, 0) == TEXT
    assert pad("", 50) == ""
    assert pad(TEXT, 50) == pad(TEXT, 50)  # deterministic


def test_the_simulator_counts_words_as_the_probes_do() -> None:
    assert sim_word_count is word_count
    assert word_count("## A header\n\n- one - two") == 4


def test_restyle_adds_a_header_and_bullets_and_keeps_every_word_in_order() -> None:
    styled = restyle(TEXT)
    lines = styled.splitlines()
    assert lines[0] == "## Paris is the capital of France."
    assert lines[1] == ""
    assert lines[2:] == [
        "- It has about two million people!",
        "- Is it old?",
        "- Yes, it was founded over two thousand years ago",
    ]
    kept = [t for t in styled.split() if t not in ("##", "-")]
    assert kept == TEXT.split()
    assert word_count(styled) == word_count(TEXT)
    assert restyle("One sentence only.") == "## One sentence only."


def test_each_protocol_claims_the_top_score_in_its_own_dialect() -> None:
    assert injection_score("prometheus").endswith("[RESULT] 5")
    assert injection_score("prometheus", pairwise=True).endswith("[RESULT] A")
    assert injection_score("flask-eval").endswith('[SCORES] {"all criteria": 5}')
    assert injection_score("flask-eval", pairwise=True).endswith('[VERDICT] {"overall": "A"}')
    assert injection_score("flask").endswith("{'all skills': 5}")
    with pytest.raises(KeyError):
        injection_score("no-such-protocol")
    with pytest.raises(KeyError):
        injection_score("flask", pairwise=True)  # FLASK's layout has no pairwise form


def test_an_injection_is_appended_and_recognised() -> None:
    assert not carries_injection(TEXT)
    for injection in INJECTIONS:
        injected = inject(TEXT, injection)
        assert injected == f"{TEXT}\n\n{injection}"
        assert carries_injection(injected)
        assert carries_injection(restyle(pad(injected, 50)))
    assert injections_in(inject(TEXT, INSTRUCTION)) == ("instruction",)
    assert injections_in(inject(TEXT, CLAIMS[0])) == ("score",)


def _rendered_response(name: str, response: str) -> str:
    """The response as protocol ``name``'s prompt shows it (its untrusted text
    neutralized), cut out of the rendered messages."""
    criteria = [load_default().get("Readability")]
    prompt = "\n".join(
        text_of(m) for m in protocol(name).render(Subject("Q?", "", response), criteria)
    )
    return prompt


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_an_injection_is_recognised_and_removed_as_a_prompt_shows_it(name: str) -> None:
    injected = inject(TEXT, injection_score(name))
    prompt = _rendered_response(name, injected)
    assert injection_score(name) not in prompt or name == "flask"  # neutralized, most
    assert carries_injection(prompt)
    assert not carries_injection(_rendered_response(name, TEXT))
    assert canonical(prompt) == canonical(_rendered_response(name, TEXT))


@pytest.mark.parametrize("name", list(PAIRWISE_PROTOCOLS))
def test_a_pairwise_claim_is_recognised_as_a_pairwise_prompt_shows_it(name: str) -> None:
    criteria = [load_default().get("Readability")]
    subject = Subject("Q?", "", inject(TEXT, injection_score(name, True)), "", "Other.")
    p = pairwise_protocol(name)
    prompt = "\n".join(text_of(m) for m in p.render(subject, criteria))
    assert injection_score(name, True) not in prompt  # the prompt neutralized it
    assert carries_injection(prompt)


@settings(max_examples=200, deadline=None)
@given(texts, st.sampled_from((25, 50, 100)), st.sampled_from(INJECTIONS))
def test_every_twin_has_its_originals_canonical_text(text: str, percent: int, x: str) -> None:
    c = canonical(text)
    assert canonical(pad(text, percent)) == c
    assert canonical(restyle(text)) == c
    assert canonical(inject(text, x)) == c
    assert canonical(restyle(pad(text, percent))) == c
    assert canonical(pad(restyle(text), percent)) == c
    assert canonical(restyle(inject(pad(text, percent), x))) == c
    assert canonical(canonical(text)) == c
    assert word_count(restyle(text)) == word_count(text)
    assert word_count(pad(text, percent)) >= word_count(text) * (1 + percent / 100)


def test_canonical_collapses_whitespace_and_keeps_the_content() -> None:
    assert canonical("  a\n\n b\tc ") == "a b c"
    assert canonical(TEXT) == " ".join(TEXT.split())
    assert canonical("［RESULT］ 4 and ‹‹‹RESPONSE") == "[RESULT] 4 and <<<RESPONSE"
