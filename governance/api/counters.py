"""Request counts per client and fixed window (rate limits, invalid tokens), shared by every web process.

With a Redis cache (CACHE_URL) a count is a Redis key of its window, incremented by Redis. Without one, a count is
a row of RateCount (table api_ratecount), counted by one upsert that returns the new count. Django's database cache
could not count: its `incr` reads the value and writes it back in two statements, so two processes counting at the
same moment wrote the same number, and one count was lost (300 requests of one token from two processes counted
219). A row keeps its client's current window only: a request of a later window starts it again from one, and
`rate_counts_purge` (periodic) deletes the rows of windows long over.
"""

from __future__ import annotations

import time

from django.core.cache import cache, caches
from django.core.cache.backends.db import DatabaseCache
from django.db import DEFAULT_DB_ALIAS, connections

from governance.api.models import RateCount

# A window's row is kept this long after it ended (a process whose clock is behind may still count in it).
KEEP_AFTER_END_S = 60

_TABLE = RateCount._meta.db_table
# One statement: a new counter at one, the same window's one more, a later window's from one again. A request of an
# earlier window (a process whose clock is behind) counts in the row's window.
_COUNT_UP = (
    f"INSERT INTO {_TABLE} (key, window_end, count) VALUES (%s, %s, 1) "  # noqa: S608
    f"ON CONFLICT (key) DO UPDATE SET "
    f"count = CASE WHEN excluded.window_end > {_TABLE}.window_end THEN 1 ELSE {_TABLE}.count + 1 END, "
    f"window_end = CASE WHEN excluded.window_end > {_TABLE}.window_end THEN excluded.window_end "
    f"ELSE {_TABLE}.window_end END "
    f"RETURNING count"
)
_COUNT = f"SELECT count FROM {_TABLE} WHERE key = %s AND window_end = %s"  # noqa: S608


def window_end_at(now: float, period_s: int) -> int:
    """The end (epoch seconds) of the fixed window of `period_s` seconds that `now` falls in."""
    return (int(now // period_s) + 1) * period_s


def _in_database() -> bool:
    return isinstance(caches["default"], DatabaseCache)


def window_count_up(key: str, *, window_end: int) -> int:
    """One more for `key` in the window ending at `window_end` (epoch seconds); the window's count with it."""
    if not _in_database():
        ttl = max(1, int(window_end - time.time())) + KEEP_AFTER_END_S
        counter = f"{key}:{window_end}"
        if cache.add(counter, 1, ttl):
            return 1
        try:
            return int(cache.incr(counter))
        except ValueError:  # expired between the two
            cache.add(counter, 1, ttl)
            return 1
    # On the primary, whatever the request reads (governance/lib/replica.py).
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_COUNT_UP, [key, window_end])
        return int(cursor.fetchone()[0])


def window_count(key: str, *, window_end: int) -> int:
    """What `key` counted so far in the window ending at `window_end`."""
    if not _in_database():
        return int(cache.get(f"{key}:{window_end}") or 0)
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_COUNT, [key, window_end])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def rate_counts_purge(*, now: float | None = None) -> int:
    """Delete the counters of windows over for KEEP_AFTER_END_S; how many."""
    now = time.time() if now is None else now
    deleted, _ = RateCount.objects.filter(window_end__lt=int(now) - KEEP_AFTER_END_S).delete()
    return deleted
