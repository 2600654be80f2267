"""Idle patterns told apart, as pure functions on hourly series built like real ones (no database)."""

import csv
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from governance.efficiency.idle_patterns import AFTER_WORK, FROM_START, INTERMITTENT, NIGHT, idle_pattern
from tests.efficiency.test_rules import hour, job, rules

T0 = datetime(2026, 11, 3, 9, tzinfo=UTC)
TRACE = (
    Path(__file__).resolve().parents[2].parent
    / "shared/data/traces/alibaba-genai-2026-pod-gpu/pod_gpu_timeseries_sample.csv"
)


def series(*sm: float | None, start: datetime = T0) -> list[tuple[datetime, float | None]]:
    return [(start + timedelta(hours=i), v) for i, v in enumerate(sm)]


def test_idle_hours_after_the_last_busy_one_are_idle_after_the_work():
    found = idle_pattern(series(80, 90, 85, 0, 0, 0, 0, 0), 1.0)

    assert found is not None
    assert (found.pattern, len(found.idle_hours), found.idle_after_work) == (AFTER_WORK, 5, 5)


def test_a_gpu_that_never_worked_is_idle_from_the_start():
    found = idle_pattern(series(0, 0.4, 0, None, 0), 1.0)

    assert found is not None and found.pattern == FROM_START and len(found.idle_hours) == 4  # unknown is not idle


def test_sm_alternating_hourly_between_0_and_25_to_60_is_intermittent_not_after_work():
    found = idle_pattern(series(40, 0, 25, 0, 60, 0, 35, 0, 55, 0, 30, 0, 45, 0, 50, 0, 26, 0), 1.0)

    assert found is not None and found.pattern == INTERMITTENT
    assert (found.idle_between, found.idle_after_work, found.switches) == (8, 1, 17)


def test_an_interactive_session_idle_at_night_is_told_to_stop_itself_and_a_batch_job_is_not():
    day = [70.0] * 9  # 09:00-17:00 UTC
    night = [0.0] * 14  # 18:00-07:00
    sm = [*day, *night, *day]

    assert idle_pattern(series(*sm), 1.0, is_interactive=True).pattern == NIGHT
    assert idle_pattern(series(*sm), 1.0).pattern == INTERMITTENT


def test_a_gpu_never_idle_has_no_pattern():
    assert idle_pattern(series(30, 40, None), 1.0) is None


def test_the_idle_gpu_rule_on_a_running_alternating_job_advises_on_the_waits_not_on_ending_the_job():
    hours = [hour(i, 0 if i % 2 else 25 + 5 * (i % 7)) for i in range(18)]

    drafts = rules(job(*hours, running=True))

    idle = drafts["idle_gpu"]
    assert idle.evidence["idle_pattern"] == INTERMITTENT
    assert "after doing work" not in idle.advice and "end the job" not in idle.advice
    assert "data loading" in idle.advice and "checkpoint asynchronously" in idle.advice


def test_the_idle_gpu_rule_still_tells_a_job_idle_after_its_work_to_end():
    drafts = rules(job(hour(0, 90), hour(1, 90), hour(2, 0), hour(3, 0), hour(4, 0)))

    assert drafts["idle_gpu"].evidence["idle_pattern"] == AFTER_WORK
    assert "after doing work" in drafts["idle_gpu"].advice


def test_a_notebook_idle_overnight_is_told_to_auto_stop():
    hours = [hour(i, 60 if (9 + i) % 24 in range(9, 18) else 0) for i in range(30)]

    drafts = rules(job(*hours, labels={"kind": "notebook"}))

    assert drafts["idle_gpu"].evidence["idle_pattern"] == NIGHT
    assert "auto-stop" in drafts["idle_gpu"].advice


def genai_hours() -> dict[str, list[tuple[datetime, float | None]]]:
    """Each pod's hourly mean SM, as the rollups make it from the trace's ~1-minute samples."""
    by_pod: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    with TRACE.open() as f:
        for row in csv.DictReader(f):
            if row["gpu_util_pct"]:
                by_pod[row["pod"]][int(float(row["t_rel_s"])) // 3600].append(float(row["gpu_util_pct"]))
    return {
        pod: [(T0 + timedelta(hours=h), sum(v) / len(v)) for h, v in sorted(hours.items())]
        for pod, hours in by_pod.items()
    }


@pytest.mark.skipif(not TRACE.exists(), reason="the shared Alibaba GenAI trace is not here (../shared/data)")
def test_the_genai_pods_that_alternate_are_intermittent_and_the_unused_one_idle_from_the_start():
    pods = genai_hours()

    patterns = {pod: idle_pattern(hours, 1.0) for pod, hours in pods.items()}

    assert patterns["pod_000"].pattern == INTERMITTENT  # busy 30-40%, one idle hour mid-trace, busy again
    assert patterns["pod_064"].pattern == INTERMITTENT  # traffic fading: idle hours between 1-2% ones
    assert patterns["pod_064"].idle_between >= 2
    assert patterns["pod_141"].pattern == FROM_START  # 23 hours under 1%
    kinds = {p.pattern for p in patterns.values() if p is not None}
    assert {AFTER_WORK, INTERMITTENT, FROM_START} <= kinds
