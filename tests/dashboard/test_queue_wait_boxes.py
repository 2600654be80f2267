"""The queue-wait boxes a page reads (one row per team, quartiles and whiskers in SQL on PostgreSQL) equal the boxes
of every job's wait computed in Python."""

import random
from datetime import timedelta

import pytest

from governance.dashboard.boxes import box_of
from governance.dashboard.selectors import queue_waits
from tests.factories import at, ingest, iso, job_record

pytestmark = pytest.mark.django_db


def test_each_teams_box_is_the_box_of_its_jobs_waits(cast):
    rng = random.Random(7)
    start = at("2026-11-03T10:00:00Z")
    waits: dict[str, list[float]] = {"NLP": [], "Vision": [], "(unattributed)": []}
    records = []
    for n in range(60):
        team, name = [("nlp", "NLP"), ("vision", "Vision"), ("", "(unattributed)")][n % 3]
        seconds = rng.choice([rng.randint(0, 1800), rng.randint(0, 1800), rng.randint(12_000, 54_000)])
        minutes = seconds / 60  # whole seconds, as the record format carries them
        started = start + timedelta(minutes=n)
        extra = {"team": team, "project": f"p-{team}"} if team else {"team": None, "project": "nobody-knows"}
        records.append(job_record(job_id=str(n), submit_time=iso(started - timedelta(minutes=minutes)),
                                  start_time=iso(started), **extra))  # fmt: skip
        waits[name].append(minutes)
    ingest(records)

    boxes = queue_waits(user=cast.admin, start=at("2026-11-01T00:00:00Z"), end=at("2026-12-01T00:00:00Z"))

    assert set(boxes) == set(waits)
    for name, values in waits.items():
        expected, got = box_of(values), boxes[name]
        assert got is not None and expected is not None and got.count == expected.count == 20
        for field in ("q1", "median", "q3", "lowerfence", "upperfence"):
            assert getattr(got, field) == pytest.approx(getattr(expected, field), abs=1e-6), (name, field)


def test_an_outlier_wait_stays_outside_the_whiskers_read_from_the_database(cast):
    start = at("2026-11-03T10:00:00Z")
    ingest([
        job_record(job_id=str(n), submit_time=iso(start + timedelta(hours=n) - timedelta(minutes=minutes)),
                   start_time=iso(start + timedelta(hours=n)))
        for n, minutes in enumerate([10.0, 11.0, 12.0, 13.0, 14.0, 500.0])
    ])  # fmt: skip

    box = queue_waits(user=cast.admin, start=at("2026-11-01T00:00:00Z"), end=at("2026-12-01T00:00:00Z"))["NLP"]

    assert box is not None and box.upperfence == pytest.approx(14.0) and box.lowerfence == pytest.approx(10.0)
    assert box.median == pytest.approx(12.5) and box.count == 6
