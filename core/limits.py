"""Lengths every input is checked against before anything is written (both databases).

SQLite does not enforce ``VARCHAR(n)``; PostgreSQL refuses longer values at insert time.
The producer checks these limits up front, and ``storage.models`` declares its columns
with the same numbers, so a run is either accepted by both databases or by neither.
"""

from __future__ import annotations

MAX_RUN_NAME = 200
MAX_INSTANCE_ID = 200
MAX_MODEL_NAME = 64
MAX_CRITERION_NAME = 100
MAX_DOMAIN = 100
MAX_JUDGE_NAME = 300
MAX_JUDGE_SPEC = 1000
#: the largest value of an integer column (ids, counts, tokens): PostgreSQL's ``integer``
#: (SQLite's holds more); a number from outside beyond it is refused, not sent to SQL
MAX_INTEGER = (1 << 31) - 1
