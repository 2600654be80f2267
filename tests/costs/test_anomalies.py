"""Spend anomalies from the ledger: a day far from the median of the days before it becomes a record, once."""

from datetime import date

import pytest
import time_machine
from django.conf import settings

from governance.costs.anomalies import anomalies_detect
from governance.costs.models import Anomaly
from governance.lib.anomaly import outliers, robust_score
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, ingest, job_record
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db


def test_a_robust_score_measures_the_distance_from_the_median_in_mads():
    baseline, score = robust_score(30.0, [10, 11, 9, 10, 12, 8, 10], floor=0.1)

    assert baseline == 10 and score == pytest.approx(20 / 1.4826)


def test_a_day_needs_enough_history_before_it_is_judged():
    series = [(date(2026, 11, d), 10.0) for d in range(1, 5)] + [(date(2026, 11, 5), 100.0)]

    assert outliers(series, window=28, min_days=7, threshold=5, floor=1) == []
    assert [o.day for o in outliers(series, window=28, min_days=3, threshold=5, floor=1)] == [date(2026, 11, 5)]


def day_of_gpus(job_id: str, day: int, gpus: int, team: str = "nlp") -> dict:
    start = f"2026-11-{day:02d}T00:00:00Z"
    return job_record(job_id=job_id, gpus=gpus, team=team, start_time=start, submit_time=start,
                      end_time=f"2026-11-{day:02d}T12:00:00Z", state="completed")  # fmt: skip


@time_machine.travel("2026-11-16T06:00:00Z", tick=False)
def test_a_jump_in_a_teams_spend_becomes_one_anomaly_with_its_numbers(cast):
    set_rate(H100, "10.00")
    declare(16)
    ingest([day_of_gpus(f"d{d}", d, 1) for d in range(1, 15)] + [day_of_gpus("big", 15, 12)])

    first = anomalies_detect()
    again = anomalies_detect()

    spend = [a for a in first if a.metric == "spend" and a.project_id is None]
    assert [(a.day, a.value, a.baseline) for a in spend] == [(date(2026, 11, 15), 1440, 120)]
    assert spend[0].score >= settings.GOVERNANCE_ANOMALY_THRESHOLD and spend[0].team == cast.nlp
    assert {a.metric for a in first} == {"spend", "gpu_hours"}  # the team and its project, idle share unchanged
    assert again == [] and Anomaly.objects.count() == len(first)
    assert_billing_invariants()


@time_machine.travel("2026-11-16T06:00:00Z", tick=False)
def test_anomalies_are_listed_for_the_teams_a_user_may_see_and_shown_on_the_team_page(client, cast):
    set_rate(H100, "10.00")
    declare(16)
    ingest([day_of_gpus(f"d{d}", d, 1) for d in range(1, 15)] + [day_of_gpus("big", 15, 12)])
    anomalies_detect()

    client.force_login(cast.vision_lead)
    assert client.get("/api/v1/anomalies/").json()["results"] == []
    client.force_login(cast.alice)
    listed = client.get("/api/v1/anomalies/", {"metric": "spend"}).json()["results"]
    assert [(a["team"], a["day"], a["value"]) for a in listed if a["project"] is None] == [
        ("nlp", "2026-11-15", "1440.000000")]  # fmt: skip
    page = client.get("/costs/team/nlp/?month=2026-11").content.decode()
    assert "Unusual days" in page
    assert "1,440.00" in page


def test_the_detection_runs_every_hour():
    assert settings.CELERY_BEAT_SCHEDULE["detect-anomalies"]["task"] == "costs.detect_anomalies"
