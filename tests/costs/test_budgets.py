import json
from decimal import Decimal

import pytest
import time_machine
from django.core import mail

from governance.costs.models import BudgetAlert
from governance.costs.services import budget_alerts_check, budget_set
from governance.lib.months import Month
from governance.notify import delivery
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, ingest, job_record

pytestmark = pytest.mark.django_db

NOV = Month(2026, 11)


@pytest.fixture
def calls(monkeypatch):
    """What the outbox POSTs as JSON (the webhook's address checks are tests/security/test_webhook_targets.py's)."""
    seen: list[tuple[str, dict]] = []
    monkeypatch.setattr(delivery, "_post_json", lambda url, body: seen.append((url, json.loads(json.dumps(body)))))
    return seen


def spend(hours: int, job_id: str = "1", day: int = 3) -> None:
    start = f"2026-11-{day:02d}T00:00:00Z"
    ingest([job_record(job_id=job_id, gpus=1, start_time=start, submit_time=start, state="completed",
                       end_time=f"2026-11-{day:02d}T{hours:02d}:00:00Z")])  # fmt: skip


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_each_crossed_threshold_is_announced_once_by_email_and_webhook(cast, calls, django_capture_on_commit_callbacks):
    cast.nlp_lead.email = "lead@example.org"
    cast.nlp_lead.save()
    set_rate(H100, "10.00")
    declare(1)
    budget_set(team=cast.nlp, month=NOV, amount="200.00", webhook_url="https://hooks.example.org/budget")
    spend(12)  # 120.00 of 200.00: 60 %

    with django_capture_on_commit_callbacks(execute=True):
        first = budget_alerts_check(month=NOV)
    with django_capture_on_commit_callbacks(execute=True):
        again = budget_alerts_check(month=NOV)

    assert [a.threshold for a in first] == [50] and again == []
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["lead@example.org"]
    assert "50%" in mail.outbox[0].subject
    assert calls == [("https://hooks.example.org/budget", {
        "event": "budget.threshold", "team": "NLP", "month": "2026-11", "threshold": 50, "spent": "120.00",
        "budget": "200.00", "currency": "USD", "alert": BudgetAlert.objects.get().pk,
    })]  # fmt: skip

    spend(10, job_id="2", day=4)  # 220.00: 110 %, crosses 80 and 100
    with django_capture_on_commit_callbacks(execute=True):
        later = budget_alerts_check(month=NOV)

    assert [a.threshold for a in later] == [80, 100]
    assert len(mail.outbox) == 3 and len(calls) == 3
    assert BudgetAlert.objects.count() == 3


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_the_webhook_comes_from_the_setting_when_the_budget_names_none(cast, calls, settings,
                                                                       django_capture_on_commit_callbacks):  # fmt: skip
    settings.GOVERNANCE_BUDGET_WEBHOOK_URL = "https://hooks.example.org/all"
    set_rate(H100, "10.00")
    declare(1)
    budget_set(team=cast.nlp, month=NOV, amount="100.00", thresholds=[90])
    spend(10)

    with django_capture_on_commit_callbacks(execute=True):
        budget_alerts_check(month=NOV)

    assert [url for url, _ in calls] == ["https://hooks.example.org/all"]
    assert [a.threshold for a in BudgetAlert.objects.all()] == [90]


def test_a_budget_refuses_a_negative_amount(cast):
    with pytest.raises(Exception, match="amount: must not be negative"):
        budget_set(team=cast.nlp, month=NOV, amount=Decimal("-1"))


def test_the_periodic_check_is_scheduled(settings):
    assert settings.CELERY_BEAT_SCHEDULE["check-budgets"]["task"] == "costs.check_budgets"
