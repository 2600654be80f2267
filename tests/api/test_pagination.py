import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIRequestFactory

from governance.api.pagination import OrderedPageNumberPagination
from governance.org.models import Team

pytestmark = pytest.mark.django_db


def test_a_page_is_never_larger_than_the_maximum(client, cast, settings):
    settings.API_MAX_PAGE_SIZE = 1
    client.force_login(cast.admin)

    response = client.get("/api/v1/teams/", {"page_size": 1000})

    body = response.json()
    assert body["count"] == 2 and len(body["results"]) == 1 and body["next"]


def test_the_default_page_size_is_a_setting(client, cast, settings):
    settings.API_PAGE_SIZE = 1
    client.force_login(cast.admin)

    assert len(client.get("/api/v1/projects/").json()["results"]) == 1


def test_pagination_refuses_an_unordered_queryset(cast):
    request = APIRequestFactory().get("/api/v1/teams/")
    from rest_framework.request import Request

    with pytest.raises(ImproperlyConfigured, match="unordered queryset"):
        OrderedPageNumberPagination().paginate_queryset(Team.objects.order_by(), Request(request))


def test_a_page_past_the_end_is_a_404_in_the_error_shape(client, cast):
    client.force_login(cast.admin)

    response = client.get("/api/v1/teams/", {"page": 9})

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_bad_filter_value_names_the_field(client, cast):
    client.force_login(cast.admin)

    response = client.get("/api/v1/jobs/", {"started_after": "yesterday"})

    assert response.status_code == 400
    assert "started_after" in response.json()["error"]["details"]


def test_lists_filter_and_order(client, cast):
    client.force_login(cast.admin)

    assert [p["slug"] for p in client.get("/api/v1/projects/", {"team": "vision"}).json()["results"]] == ["detector"]
    ordered = client.get("/api/v1/teams/", {"ordering": "-slug"}).json()["results"]
    assert [t["slug"] for t in ordered] == ["vision", "nlp"]
