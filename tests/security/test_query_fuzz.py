"""Generated query strings against the main GET pages and endpoints: whatever a client sends, no 500.

Schemathesis (tests/api/test_schemathesis.py) covers the API from its schema; this covers the HTML pages and
the query parameters every page and list shares, with values chosen to break parsers: unicode digits, huge
numbers, years 1 and 9999, offsets, NUL bytes, long strings. Bounded to about a minute.
"""

import time
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.django_db

BUDGET_S = 60
NASTY = ["", "0", "-1", "²", "١٢", "99999999999999999999999", "1e309", "NaN", "0001-01-01", "9999-12-31",
         "2026-02-30", "2026-11", "0000-00", "2026-11-03T00:00:00+23:59", "9999-12-31T23:59:59-01:00",
         "\x00", "'\"<a>", "%", "vision", "nlp", "live", "idle_gpu", "day", "hour", "-waste", "?",
         "x" * 300]  # fmt: skip
value = st.one_of(st.sampled_from(NASTY), st.text(max_size=20), st.integers().map(str), st.dates().map(str))
PARAMS = ["start", "end", "month", "cluster", "team", "job", "rule", "state", "page", "page_size", "resolution",
          "ordering", "started_after", "started_before", "since", "until", "active", "scope", "format"]  # fmt: skip
query = st.dictionaries(st.sampled_from(PARAMS), value, max_size=4)

PAGES = ["/", "/cluster/", "/findings/", "/chargeback.csv", "/costs/", "/costs/team/nlp/"]
API = ["/api/v1/findings/", "/api/v1/jobs/", "/api/v1/tokens/", "/api/v1/teams/", "/api/v1/audit/",
       "/api/v1/chargeback/", "/api/v1/clusters/", "/api/v1/budgets/"]  # fmt: skip


def test_no_query_string_makes_a_page_or_an_api_list_answer_500(client, world):
    client.force_login(world.cast.admin)
    urls = [*PAGES, *API, f"/api/v1/clusters/{world.cluster.pk}/utilisation/", f"/jobs/{world.job_bob.pk}/"]
    deadline = time.monotonic() + BUDGET_S
    failures: list[str] = []

    @given(url=st.sampled_from(urls), params=query)
    @settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    def check(url: str, params: dict[str, str]) -> None:
        if time.monotonic() > deadline:
            return
        target = f"{url}?{urlencode(params)}"
        try:
            response = client.get(target)
            if response.streaming:
                b"".join(response.streaming_content)
        except Exception as exc:  # an exception the test client re-raises is a 500 in production
            failures.append(f"{target}: {type(exc).__name__}: {exc}")
            return
        if response.status_code >= 500:
            failures.append(f"{target}: {response.status_code}")

    check()

    assert failures == [], "\n".join(sorted(set(failures))[:20])
