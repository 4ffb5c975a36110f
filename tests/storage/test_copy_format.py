"""The COPY text of a bulk load (storage.postgres_store._copy) remembers each column's
short values: the lines are those of formatting every value, booleans included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flask_eval.storage import postgres_store

pytestmark = pytest.mark.unit


class Sink:
    """A cursor's ``copy`` that keeps what is written."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def copy(self, statement: str) -> Sink:
        self.statement = statement
        return self

    def __enter__(self) -> Sink:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def write(self, text: str) -> None:
        self.sent.append(text)


def test_remembered_values_give_the_lines_of_formatting_each_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(postgres_store, "COPY_BUFFER", 200)  # several writes
    now = datetime(2026, 12, 4, 6, 0, tzinfo=UTC)
    long = "x\ty\\z" * 100  # longer than MEMO_CHARS: formatted each time
    rows: list[tuple[Any, ...]] = []
    for n in range(300):
        flag: Any = [0, 1, True, False, None][n % 5]  # booleans equal 0 and 1
        rows.append(
            (
                7,
                f"m{n % 3}",
                "a\nb" if n % 2 else "",
                flag,
                long if n % 7 else None,
                now + timedelta(seconds=n % 4),
                n,
            )
        )
    sink = Sink()
    postgres_store._copy(sink, "t", [f"c{k}" for k in range(7)], rows)
    expected = ["\t".join(map(postgres_store._copy_text, row)) for row in rows]
    assert "".join(sink.sent).splitlines() == expected
    assert len(sink.sent) > 1
    assert [line.split("\t")[3] for line in expected[:5]] == ["0", "1", "t", "f", "\\N"]
