"""The conditions, pure: the job's hours in, whether the condition holds out."""

from __future__ import annotations

from datetime import timedelta

from governance.remediation.conditions import HourRow, condition_check
from governance.remediation.scope import exemption, in_scope
from tests.factories import at

NOW = at("2026-11-03T12:05:00Z")


def hours(gpu: str, sms: list[float], first: str = "2026-11-03T09:00:00Z") -> list[HourRow]:
    start = at(first)
    return [HourRow(gpu, start + timedelta(hours=n), 12, 12, sm * 12) for n, sm in enumerate(sms)]


def check(condition: str, rows: list[HourRow], now=NOW, labels=None, started="2026-11-03T09:00:00Z"):
    return condition_check(condition=condition, rows=rows, now=now, idle_hours=2, idle_sm=1.0,
                           started_at=at(started), labels=labels or {})  # fmt: skip


def test_idle_after_work_needs_work_before_the_window():
    assert check("idle_after_work", hours("g0", [80, 0, 0, 0])).holds
    assert not check("idle_after_work", hours("g0", [0, 0, 0, 0])).holds
    assert check("idle_gpu", hours("g0", [0, 0, 0, 0])).holds


def test_an_hour_of_work_in_the_window_spares_the_job():
    verdict = check("idle_gpu", hours("g0", [80, 0, 0, 40]))
    assert not verdict.holds and verdict.why == "1 GPU(s) worked in the window"


def test_overallocated_needs_an_idle_gpu_beside_a_working_one():
    assert check("overallocated", hours("g0", [80, 80, 80, 80]) + hours("g1", [0, 0, 0, 0])).holds
    assert not check("overallocated", hours("g0", [0, 0, 0, 0]) + hours("g1", [0, 0, 0, 0])).holds


def test_interactive_night_holds_for_a_session_at_night_only():
    night = at("2026-11-03T23:05:00Z")
    rows = hours("g0", [0] * 15)
    assert check("interactive_night", rows, now=night, labels={"kind": "notebook"}).holds
    assert not check("interactive_night", rows, now=night, labels={"kind": "training"}).holds
    assert not check("interactive_night", rows, labels={"kind": "notebook"}).holds  # 12:05: daytime


def test_a_job_younger_than_the_window_or_without_rollups_over_it_is_spared():
    assert not check("idle_gpu", hours("g0", [0, 0, 0, 0]), started="2026-11-03T11:00:00Z").holds
    verdict = check("idle_gpu", hours("g0", [0], first="2026-11-03T12:00:00Z"))
    assert not verdict.holds and verdict.why == "the rollups do not cover the window"


def test_scope_and_exemptions():
    assert in_scope(team="nlp", teams=["nlp"], partition="gpu", partitions=[], namespace="", namespaces=[])
    assert not in_scope(team="vision", teams=["nlp"], partition="", partitions=[], namespace="", namespaces=[])
    assert not in_scope(team="nlp", teams=[], partition="debug", partitions=["gpu"], namespace="", namespaces=[])
    spare = {"exempt_users": ["bob"], "exempt_labels": ["keep=yes", "pinned"], "exempt_job_names": ["bench-*"]}
    assert exemption(user="bob", name="x", labels={}, **spare) == "user bob is exempt"
    assert exemption(user="al", name="x", labels={"pinned": "1"}, **spare) == "label pinned is exempt"
    assert exemption(user="al", name="x", labels={"keep": "no"}, **spare) == ""
    assert exemption(user="al", name="bench-a100", labels={}, **spare).startswith("job name bench-a100")
