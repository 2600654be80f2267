"""A read-only request asks the database a repeated question once (governance/lib/memo.py); a write, a task or a
command asks it every time."""

import pytest
import time_machine
from django.db import connection
from django.http import HttpResponse
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from governance.costs.selectors import month_closed
from governance.costs.services import statement_close
from governance.lib.memo import ReadMemoMiddleware, memoised
from governance.lib.months import Month
from tests.invariants import assert_billing_invariants

NOV = Month(2026, 11)


def _asked_twice(calls: list[int]):
    def view(request):
        first = memoised("question", lambda: calls.append(1) or len(calls))
        second = memoised("question", lambda: calls.append(1) or len(calls))
        return HttpResponse(f"{first} {second}")

    return view


@pytest.mark.parametrize(("method", "answers", "computed"), [("get", b"1 1", 1), ("head", b"1 1", 1),
                                                              ("post", b"1 2", 2)])  # fmt: skip
def test_only_a_read_only_request_keeps_an_answer_and_only_for_itself(method, answers, computed):
    calls: list[int] = []
    middleware = ReadMemoMiddleware(_asked_twice(calls))

    response = middleware(getattr(RequestFactory(), method)("/"))
    again = memoised("question", lambda: "asked again")

    assert (response.content, len(calls)) == (answers, computed)
    assert again == "asked again"  # the request's memo went with it


@pytest.mark.django_db
def test_the_team_month_page_asks_whether_its_month_is_closed_once(client, cast, usage):
    client.force_login(cast.nlp_lead)

    with CaptureQueriesContext(connection) as queries:
        page = client.get("/costs/team/nlp/", {"month": str(NOV)})

    asked = [q for q in queries.captured_queries if 'WHERE "costs_monthclose"."month" = ' in q["sql"]]
    assert page.status_code == 200 and b"NLP" in page.content
    assert len(asked) == 1
    assert_billing_invariants()


@pytest.mark.django_db
def test_outside_a_request_a_close_is_seen_at_once(cast, usage):
    before = month_closed(NOV)
    with time_machine.travel("2026-12-02T09:00:00Z", tick=False):
        statement_close(month=NOV, user=cast.finance)

    assert before is None
    assert month_closed(NOV) is not None
    assert_billing_invariants()
