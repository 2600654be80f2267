"""The demo month `make run` loads: the savings its findings promise are measured over the last 30 days, so no team is
promised more than it spent, and no finding more than its job cost (issue 27: before, nlp was promised 2.96x its
spend, vision 1.86x, recsys 1.26x). Run with -s for the table."""

import io
from collections import Counter
from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command

from governance.efficiency.models import Finding
from governance.org.models import Team
from tests.factories import committed
from tests.invariants import assert_billing_invariants, assert_savings_within_spend

pytestmark = pytest.mark.django_db


@time_machine.travel("2026-12-01T00:30:00Z", tick=False)
def test_it_promises_no_team_more_than_it_spent_over_the_same_30_days():
    with committed():
        call_command("seed_demo", stdout=io.StringIO())
    call_command("evaluate_findings", stdout=io.StringIO())

    teams = assert_savings_within_spend()["teams"]
    assert_billing_invariants()
    names = dict(Team.objects.values_list("pk", "slug"))
    for team, (savings, spend) in sorted(teams.items(), key=lambda kv: names.get(kv[0], "")):
        print(f"  {names.get(team)}: open findings save {savings:,.2f} of {spend:,.2f} spent ({savings / spend:.2f}x)")
    assert {names[t] for t in teams} == {"nlp", "vision", "recsys"}
    assert all(Decimal(0) < savings < spend for savings, spend in teams.values())
    open_findings = Finding.objects.filter(state="open")
    assert open_findings.exists() and not open_findings.filter(savings_from__isnull=True).exists()
    patterns = Counter(open_findings.filter(rule="idle_gpu").values_list("evidence__idle_pattern", flat=True))
    print(f"  idle_gpu findings by pattern: {dict(patterns)}")
    # The demo's running jobs whose SM alternates hourly are told about the waits, not to end the job.
    running = open_findings.filter(rule="idle_gpu", job__end_time__isnull=True, evidence__idle_pattern="intermittent")
    assert running.exists() and all("after doing work" not in f.advice for f in running)
