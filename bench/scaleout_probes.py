"""What bench/scaleout.py reads: CPU from /proc, server counters, the backends of one
database, the WAL of one database's relations, the Redis commands of one database."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis

from bench.harness import POSTGRES_URL

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int | str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _cpu(f: list[str], children: bool = True) -> float:
    """utime + stime (+ cutime + cstime: the children it reaped) in seconds."""
    ticks = int(f[11]) + int(f[12]) + ((int(f[13]) + int(f[14])) if children else 0)
    return ticks / TICK


def _all_stats() -> list[list[str]]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (f := _stat(name)) is not None:
            out.append(f)
    return out


def session_cpu(sid: int) -> float:
    """CPU of every process of session ``sid`` (and of the children they reaped)."""
    return sum(_cpu(f) for f in _all_stats() if int(f[3]) == sid)


def postgres_cpu(postmaster: int) -> float:
    """The whole server: the postmaster (with the backends it reaped) + its live children."""
    own = _stat(postmaster)
    assert own is not None, "cannot read the postmaster's /proc entry"
    live = sum(_cpu(f, children=False) for f in _all_stats() if int(f[1]) == postmaster)
    return _cpu(own) + live


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


@dataclass
class Counters:
    """Server-wide counters at one instant (shared services: others' load included)."""

    t: float
    pg_cpu: float
    wal: int
    lsn: str
    redis_cpu: float
    redis_commands: int

    @classmethod
    def read(cls, admin: psycopg.Connection[Any], postmaster: int, r: redis.Redis) -> Counters:
        row = admin.execute("select pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        info = r.info("all")
        return cls(
            time.perf_counter(),
            postgres_cpu(postmaster),
            _lsn(row[0]),
            row[0],
            float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
            int(info["total_commands_processed"]),
        )

    def minus(self, other: Counters) -> dict[str, float]:
        return {
            "seconds": self.t - other.t,
            "pg_cpu": self.pg_cpu - other.pg_cpu,
            "wal_bytes": self.wal - other.wal,
            "redis_cpu": self.redis_cpu - other.redis_cpu,
            "redis_commands": self.redis_commands - other.redis_commands,
        }


@dataclass
class BackendPoller:
    """Samples the backends of one database every 0.25 s: their CPU and how many there are."""

    dbname: str
    exclude: set[int] = field(default_factory=set)
    first: dict[int, float] = field(default_factory=dict)
    last: dict[int, float] = field(default_factory=dict)
    max_backends: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _conn: psycopg.Connection[Any] | None = None

    def start(self) -> None:
        self._sample(initial=True)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self, initial: bool = False) -> None:
        if self._conn is None:
            self._conn = psycopg.connect(POSTGRES_URL, autocommit=True)
        rows = self._conn.execute(
            "select pid from pg_stat_activity where datname = %s", (self.dbname,)
        )
        pids = [int(p) for (p,) in rows if int(p) not in self.exclude]
        self.max_backends = max(self.max_backends, len(pids))
        for pid in pids:
            if (f := _stat(pid)) is not None:
                cpu = _cpu(f, children=False)
                self.last[pid] = cpu
                self.first.setdefault(pid, cpu if initial else 0.0)

    def _loop(self) -> None:
        while not self._stop.wait(0.25):
            self._sample()

    def stop(self) -> float:
        """The CPU the database's backends used since start()."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        if self._conn is not None:
            self._conn.close()
        return sum(self.last[p] - self.first[p] for p in self.last)


class WalWatcher:
    """WAL bytes of the records touching one database's relations (pg_walinspect),
    read every 2 s as it is written: others' WAL on a shared server would otherwise
    recycle the segments before the run ends. Commit records (no relation) are left out.
    Its own backend's pid is ``pid``, for the CPU accounting to leave out."""

    def __init__(self, db: str, start: str) -> None:
        self.conn = psycopg.connect(db, autocommit=True)
        self.conn.execute("create extension if not exists pg_walinspect")
        row = self.conn.execute(
            "select pg_backend_pid(), (select oid from pg_database"
            " where datname = current_database())"
        ).fetchone()
        assert row is not None
        self.pid, self.oid = int(row[0]), int(row[1])
        self.at = start
        self.bytes = 0
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _scan(self, end: str | None) -> None:
        if self.lost:
            return
        try:
            row = self.conn.execute(
                "with e as (select least(coalesce(%s::pg_lsn, pg_current_wal_flush_lsn()),"
                " pg_current_wal_flush_lsn()) as lsn)"
                " select (select coalesce(sum(record_length), 0) from"
                " pg_get_wal_records_info(%s, (select lsn from e))"
                " where block_ref like %s), (select lsn from e)::text",
                (end, self.at, f"%/{self.oid}/%"),
            ).fetchone()
        except psycopg.Error:
            self.lost = True  # a segment recycled before it was read
            return
        assert row is not None
        self.bytes += int(row[0])
        self.at = str(row[1])

    def _loop(self) -> None:
        while not self._stop.wait(2.0):
            self._scan(None)

    def stop(self, end: str) -> int | None:
        self._stop.set()
        self._thread.join()
        self._scan(end)
        self.conn.close()
        return None if self.lost else self.bytes


class RedisMonitor:
    """Commands sent to one Redis database (MONITOR, filtered by its db number)."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.db = int(self.client.connection_pool.connection_kwargs.get("db", 0))
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _loop(self) -> None:
        with self.client.monitor() as m:  # type: ignore[no-untyped-call]
            self._ready.set()
            for cmd in m.listen():
                if self._stop.is_set():
                    return
                if int(cmd.get("db", -1)) == self.db:
                    self.counts[str(cmd["command"]).split(" ", 1)[0].upper()] += 1

    def stop(self) -> Counter[str]:
        counts = Counter(self.counts)
        self._stop.set()
        self.client.ping()  # wakes the listener
        self._thread.join(5)
        return counts
