"""docs/prometheus-rules.yml passes promtool, and it and docs/grafana-dashboard.json name only series /metrics
exposes (or the rules record)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.observability.conftest import REPO, RULES, TOKEN, installed

DASHBOARD = REPO / "docs" / "grafana-dashboard.json"
SERIES = re.compile(r"\bgg[_:][A-Za-z0-9_:]*")


def exposed_series() -> set[str]:
    """Every series name a scrape of /metrics can show (a counter's samples end in _total)."""
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    names = set()
    for family in text_string_to_metric_families(response.content.decode()):
        names.add(family.name + "_total" if family.type == "counter" else family.name)
    return names


def recorded_series() -> set[str]:
    return set(re.findall(r"^\s*- record: (\S+)$", RULES.read_text(), flags=re.M))


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_without_the_program_it_skips_with_the_reason_but_fails_in_ci(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda program: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs promtool"):
        installed("promtool")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="absent in CI"):
        installed("promtool")


def test_promtool_finds_the_rules_file_valid():
    promtool = installed("promtool")
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 8 rules found" in checked.stdout


@pytest.mark.django_db
def test_the_rules_name_only_series_metrics_exposes_or_they_record(cast):
    # expressions (some folded over lines) and the annotations that name series; not comments, not record names
    lines = [line for line in RULES.read_text().splitlines() if not line.lstrip().startswith(("#", "- record:"))]
    named = {name for line in lines for name in SERIES.findall(line)}

    assert named and named - recorded_series() <= exposed_series(), named - recorded_series() - exposed_series()
    assert recorded_series() <= named  # every recorded series is used by an alert


@pytest.mark.django_db
def test_the_grafana_dashboard_parses_and_names_only_series_metrics_exposes_or_the_rules_record(cast):
    expressions = dashboard_expressions()
    named = {name for expr in expressions for name in SERIES.findall(expr)}

    assert len(expressions) >= 10
    assert named - recorded_series() - exposed_series() == set()
    # every gauge on /metrics has a panel
    assert exposed_series() <= named, exposed_series() - named
