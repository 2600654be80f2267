"""A real Prometheus scrapes /metrics with the README's job: the gg_ series it stores equal the ledger's figures,
and docs/prometheus-rules.yml is loaded and fires (conftest.py starts it once per run)."""

from __future__ import annotations

import difflib
import json
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
import requests
from django.db.models import Sum
from django.utils import timezone

from governance.costs.models import OverClaim
from governance.costs.selectors import chargeback_by_team
from governance.costs.services import budget_set, capacity_set
from governance.lib.months import Month
from governance.usage import services as usage_services
from governance.usage.models import IngestBatch
from governance.usage.services import inbox_failure_record, usage_batch_process
from tests.factories import H100, at, iso, job_record, priced, rate, series
from tests.invariants import assert_billing_invariants
from tests.observability.conftest import README_TARGET, README_TOKEN_FILE, Prometheus, eventually, readme_scrape_job

pytestmark = pytest.mark.django_db(transaction=True)


def _usage(job_id: str, gpus: int = 1) -> list[dict]:
    """A running job of NLP's on c1 with one GPU's samples every minute, up to a minute ago in this month."""
    now = timezone.now().replace(second=0, microsecond=0)
    start = max(now - timedelta(hours=2), Month.of(now).start)
    minutes = max(int((now - start).total_seconds() // 60), 1)
    job = job_record(job_id=job_id, gpus=gpus, submit_time=iso(start), start_time=iso(start))
    return [job, *series(start=start, minutes=minutes, job_id=job_id, gpu_uuid=f"GPU-{job_id}")]


def _send(live_server, token: str, records: list[dict]) -> None:
    body = {"batch_id": str(uuid.uuid4()), "collector": "prometheus-test", "records": records}
    response = requests.post(
        f"{live_server.url}/api/v1/ingest/", data=json.dumps(body), timeout=30,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code == 202, response.text


def _nlp_cost(month: Month) -> Decimal:
    (charge,) = [c for c in chargeback_by_team(month=month) if c.team == "NLP"]
    return charge.cost


def test_it_scrapes_metrics_with_the_readme_job_changed_only_in_target_and_token_file(prometheus: Prometheus):
    changed = [line for line in difflib.ndiff(readme_scrape_job().splitlines(), prometheus.job.splitlines())
               if line.startswith(("- ", "+ "))]  # fmt: skip
    assert sorted(changed) == sorted([
        f'-       - targets: ["{README_TARGET}"]', f'+       - targets: ["{prometheus.target}"]',
        f"-       credentials_file: {README_TOKEN_FILE}", f"+       credentials_file: {prometheus.token_file}",
    ])  # fmt: skip

    def scraped() -> dict | None:
        targets = prometheus.api("targets")["activeTargets"]
        up = [t for t in targets if t["labels"]["job"] == "gpu-governance" and t["health"] == "up"]
        return up[0] if up else None

    target = eventually(scraped)
    assert target, prometheus.api("targets")
    assert target["scrapeUrl"] == f"http://{prometheus.target}/metrics"
    loaded = prometheus.api("status/config")["yaml"]
    assert "type: Bearer" in loaded and f"credentials_file: {prometheus.token_file}" in loaded
    assert eventually(lambda: prometheus.value('up{job="gpu-governance"}') == 1)
    checks = eventually(lambda: {r["metric"]["check"] for r in prometheus.query("gg_ready")})
    assert checks == {"database", "broker", "inbox_backlog", "inbox_oldest_age"}


def test_the_backlog_is_the_unprocessed_batches_and_each_teams_cost_is_its_chargeback(
    prometheus: Prometheus, live_server, cast, ingest_token, monkeypatch
):
    rate(price="2.00")
    monkeypatch.setattr(usage_services, "_publish", lambda inbox_pk: None)  # no worker picks them up
    for n in range(3):
        _send(live_server, ingest_token, _usage(job_id=f"70{n}"))

    waiting = IngestBatch.objects.filter(processed_at__isnull=True, dead_at__isnull=True)
    assert waiting.count() == 3
    assert eventually(lambda: prometheus.value("gg_inbox_backlog_batches") == 3), prometheus.query("gg_inbox_backlog_")
    assert prometheus.value("gg_inbox_backlog_records") == sum(waiting.values_list("record_count", flat=True))

    for pk in waiting.values_list("pk", flat=True):
        usage_batch_process(inbox_pk=pk)
    priced()

    month = Month.of(timezone.now())
    cost = _nlp_cost(month)
    assert cost > 0
    assert eventually(lambda: prometheus.value("gg_inbox_backlog_batches") == 0)
    nlp = 'gg_team_cost_month{team="NLP",currency="USD"}'
    assert eventually(lambda: prometheus.value(nlp) == float(cost)), (prometheus.query("gg_team_cost_month"), cost)
    assert prometheus.value("gg_pricing_marks_pending") == 0
    assert_billing_invariants()


def test_the_rules_are_loaded_and_a_dead_batch_fires_its_alert_at_once(
    prometheus: Prometheus, live_server, cast, ingest_token, settings, monkeypatch
):
    groups = eventually(lambda: prometheus.api("rules")["groups"])
    names = {rule["name"] for group in groups for rule in group["rules"]}
    assert {"gg:overclaim_gpu_hours:sum_by_cluster", "gg:team_budget_used:ratio", "GpuGovernanceIngestBatchesDead",
            "GpuGovernancePricingLag", "GpuGovernanceGpuOverClaims", "GpuGovernanceBudgetBreached",
            "GpuGovernanceIngestBacklog"} <= names  # fmt: skip
    assert all(rule["health"] == "ok" for group in groups for rule in group["rules"]), groups

    monkeypatch.setattr(usage_services, "_publish", lambda inbox_pk: None)
    _send(live_server, ingest_token, _usage("801"))
    settings.INGEST_MAX_ATTEMPTS = 0  # its next failure is its last
    inbox_failure_record(inbox_pk=IngestBatch.objects.get().pk, error=RuntimeError("a batch no worker could process"))
    assert IngestBatch.objects.get().dead_at is not None

    def firing() -> list[dict]:
        return [a for a in prometheus.api("alerts")["alerts"]
                if a["labels"]["alertname"] == "GpuGovernanceIngestBatchesDead" and a["state"] == "firing"]  # fmt: skip

    alerts = eventually(firing)
    assert alerts, prometheus.api("alerts")
    assert alerts[0]["labels"]["severity"] == "critical" and float(alerts[0]["value"]) == 1
    assert prometheus.value("gg_inbox_dead_batches") == 1
    assert prometheus.value("gg_inbox_backlog_batches") == 0  # it waits for an admin, not for a worker


def test_a_team_over_its_budget_fires_the_budget_alert(prometheus: Prometheus, live_server, cast, ingest_token):
    rate(price="2.00")
    _send(live_server, ingest_token, _usage("901"))
    priced()
    month = Month.of(timezone.now())
    cost = _nlp_cost(month)
    half = (cost / 2).quantize(Decimal("0.01"))
    budget_set(team=cast.nlp, month=month, amount=half)

    assert eventually(lambda: prometheus.value('gg_team_budget_month{team="NLP"}') == float(half))

    def breached() -> list[dict]:
        return [a for a in prometheus.api("alerts")["alerts"]
                if a["labels"]["alertname"] == "GpuGovernanceBudgetBreached" and a["state"] == "firing"]  # fmt: skip

    alerts = eventually(breached)
    assert [a["labels"]["team"] for a in alerts] == ["NLP"]
    assert float(alerts[0]["value"]) == pytest.approx(float(cost) / float(half))  # spent / budget
    assert_billing_invariants()


def test_the_overclaim_gauge_is_the_months_overclaimed_gpu_hours_of_each_cluster(
    prometheus: Prometheus, live_server, cast, ingest_token
):
    rate(price="2.00")
    capacity_set(cluster="c1", gpu_model=H100, count=1, valid_from=at("2026-01-01T00:00:00Z"))
    _send(live_server, ingest_token, _usage("601", gpus=4))  # four GPUs declared, one sampled, one on the cluster
    priced()

    month = Month.of(timezone.now())
    hours = OverClaim.objects.filter(cluster__name="c1", day__gte=month.start.date()).aggregate(
        h=Sum("overclaimed_gpu_hours")
    )["h"]
    assert hours and hours > 0
    expr = f'gg_overclaim_gpu_hours{{cluster="c1",gpu_model="{H100}"}}'
    assert eventually(lambda: prometheus.value(expr) == float(hours)), prometheus.query("gg_overclaim_gpu_hours")
    assert eventually(lambda: prometheus.value('gg:overclaim_gpu_hours:sum_by_cluster{cluster="c1"}') == float(hours))

    def alerted() -> list[dict]:
        return [a for a in prometheus.api("alerts")["alerts"]
                if a["labels"]["alertname"] == "GpuGovernanceGpuOverClaims" and a["state"] == "firing"]  # fmt: skip

    assert [a["labels"]["cluster"] for a in eventually(alerted)] == ["c1"]  # the month's first over-claim alerts too
    assert_billing_invariants()
