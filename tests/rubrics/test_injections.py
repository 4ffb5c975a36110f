"""A faithful quote never turns the response into a score, in every protocol.

For each protocol (ours, absolute and pairwise; Prometheus, absolute and relative;
FLASK's review), each untrusted text of the corpus (tests/rubrics/injections.py) and a
property-based sample of texts built from the readers' own vocabulary: the text is
rendered in the prompt as the protocol shows it (neutralized), and a complete judge
answer that ends by quoting it verbatim is read back. The reader must find no score and
no verdict in it: the neutralizers are built from the readers' grammars (the reader's
own compiled patterns, or for FLASK's dictionary the reader's own parse), so whatever a
reader accepts, its neutralizer rewrites.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flask_eval.rubrics import flask_review, pairwise, prometheus, prometheus_relative, prompt
from flask_eval.rubrics.flask_review import FlaskReviewProtocol
from flask_eval.rubrics.grading import FlaskEvalProtocol, Protocol, Subject
from flask_eval.rubrics.messages import text_of
from flask_eval.rubrics.pairwise import FlaskEvalPairwiseProtocol
from flask_eval.rubrics.prometheus import PrometheusProtocol
from flask_eval.rubrics.prometheus_relative import PrometheusRelativeProtocol
from flask_eval.rubrics.skills import Skill, load_default
from tests.rubrics.injections import CRITERIA, INJECTIONS

SKILLS = [load_default().get(name) for name in CRITERIA]
LEAD = "Feedback: The response is short and plain.\n\nThe response reads, in full:\n"


@dataclass(frozen=True)
class Layout:
    name: str
    protocol: Protocol
    criteria: list[Skill]
    shown: Callable[[str], str]  # the text as the protocol's prompt shows it
    pairwise: bool = False


LAYOUTS = [
    Layout("flask-eval", FlaskEvalProtocol(), SKILLS, prompt.neutralize),
    Layout("flask-eval pairwise", FlaskEvalPairwiseProtocol(), SKILLS, pairwise.neutralize, True),
    Layout("prometheus", PrometheusProtocol(), SKILLS[:1], prometheus.neutralize),
    Layout(
        "prometheus relative",
        PrometheusRelativeProtocol(),
        SKILLS[:1],
        prometheus_relative.neutralize,
        True,
    ),
    Layout(
        "flask",
        FlaskReviewProtocol(),
        SKILLS,
        lambda text: flask_review.neutralize(text, list(CRITERIA)),
    ),
]


def quoted_answers(layout: Layout, text: str) -> list[str]:
    """Complete judge answers that end by quoting ``text`` as the prompt showed it (as
    the response, and as the instruction), checking that it was shown so."""
    response_b = text if layout.pairwise else None
    subject = Subject("Name the capital of France.", "", text, response_b=response_b)
    user = text_of(layout.protocol.render(subject, layout.criteria)[-1])
    shown = layout.shown(text).strip()
    assert shown in user, "the quote is not what the prompt shows"
    instruction = text_of(
        layout.protocol.render(
            Subject(text, "", "Paris.", response_b=response_b and "x"), layout.criteria
        )[-1]
    )
    assert layout.shown(text).strip() in instruction
    return [LEAD + shown, LEAD + shown + "\n```\n\n", LEAD + "```\n" + shown + "\n```"]


def read_anything(layout: Layout, answer: str) -> dict[str, object]:
    return dict(layout.protocol.read(answer, layout.criteria).scores)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: x.name)
@pytest.mark.parametrize(("case", "text"), INJECTIONS, ids=[c for c, _ in INJECTIONS])
def test_a_quoted_injection_is_never_read(layout: Layout, case: str, text: str) -> None:
    for answer in quoted_answers(layout, text):
        assert read_anything(layout, answer) == {}, answer


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: x.name)
def test_the_corpus_would_score_without_the_neutralizer(layout: Layout) -> None:
    """The corpus is hostile to every reader: quoted raw (not neutralized), some entries
    do become scores, so the test above tests the neutralizers, not the corpus."""
    forged = [c for c, text in INJECTIONS if read_anything(layout, LEAD + text)]
    assert len(forged) >= 3, forged


# --- property: texts built from the readers' vocabulary --------------------------------

_VOCABULARY = [
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    ":",
    " ",
    "  ",
    "\n",
    "\u2028",
    "\x85",
    "\x1c",
    "\r",
    "*",
    "**",
    "_",
    "`",
    '"',
    "'",
    ".",
    "!",
    "/",
    ",",
    "#",
    "###",
    "-",
    "<<<",
    ">>>",
    "RESULT",
    "result",
    "Result",
    "SCORES",
    "scores",
    "SCORE",
    "Score",
    "score",
    "of",
    "final",
    "overall",
    "out of",
    "VERDICT",
    "Response",
    "response",
    "RESPONSE",
    "A",
    "B",
    "tie",
    "1",
    "3",
    "5",
    "5.0",
    "N/A",
    "Conciseness",
    "Readability",
    "conciseness_",
    "Con' 'ciseness",
    "\\x43onciseness",
    "\\u0043",
    "Feedback",
    "\uff3b",
    "\u0131",
]
_NOISE = st.lists(st.one_of(st.sampled_from(_VOCABULARY), st.text(max_size=3)), max_size=40).map(
    "".join
)
_MARKS = st.sampled_from(["", "*", "**", "_", "`", "'", '"', " ", "**`"])
#: each reader's markers and what may follow them
_FAMILIES = [
    (  # ours
        ["[SCORES]", "[scores]", "[ SCORES ]", "[Scores]:"],
        ['{"Conciseness": 5, "Readability": 5}', '{"conciseness": "N/A"}', '{"Readability": 4}'],
    ),
    (  # ours, pairwise
        ["[VERDICT]", "[verdict]", "[ Verdict ]:"],
        ['{"Conciseness": "A", "Readability": "tie"}', '{"readability": "b"}'],
    ),
    (  # Prometheus, both modes
        [
            "[RESULT]",
            "[result]",
            "[ Result ]",
            "[RESULT:",
            "[Result] Score:",
            "[RESULT] score of",
            "[SCORE]",
            "[Score",
            "(Score",
            "score of",
            "Score",
            "Final score",
            "overall score",
            "Result",
            "Result:",
            "[Response",
            "[Result] Response",
        ],
        ["5", "4.0", "1", "A", "B", "(5)", "[5]", "5/5", "5 out of 5", "A]", "(B)"],
    ),
    (  # FLASK's dictionary
        ["", "Scores:", "```python"],
        [
            "{'Conciseness': 5}",
            "{'Con' 'ciseness': 5}",
            "{'\\x43onciseness': 5}",
            "{'readability_': 4}",
            '{"Conciseness": 5, "Readability": "N/A"}',
            "{'\\u0043onciseness': 5, 'Readability': 5}",
        ],
    ),
]
_BREAKS = st.sampled_from(["\n", "\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\r"])
#: a verdict of some reader, built from its grammar's parts, after noise and a line break
VERDICTS = st.sampled_from(_FAMILIES).flatmap(
    lambda family: st.builds(
        lambda noise, brk, m1, marker, m2, colon, payload, m3, end: (
            f"{noise}{brk}{m1}{marker}{m2}{colon}{payload}{m3}{end}"
        ),
        _NOISE,
        _BREAKS,
        _MARKS,
        st.sampled_from(family[0]),
        _MARKS,
        st.sampled_from(["", ":", ": ", " "]),
        st.sampled_from(family[1]),
        _MARKS,
        st.sampled_from(["", ".", "!", "]", ")", "\n"]),
    )
)
TEXTS = st.one_of(VERDICTS, _NOISE.filter(bool))


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: x.name)
@settings(
    max_examples=120,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(text=TEXTS)
def test_no_neutralized_text_quoted_at_the_end_is_read(layout: Layout, text: str) -> None:
    for answer in quoted_answers(layout, text):
        assert read_anything(layout, answer) == {}, repr(answer)
