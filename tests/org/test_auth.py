"""The signed-in user of a request: the user behind a session, and a refusal for a request with none."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory

from governance.org.auth import NOT_SIGNED_IN, signed_in_user

pytestmark = pytest.mark.django_db


def test_a_signed_in_request_gives_its_user(cast):
    request = RequestFactory().get("/")
    request.user = cast.alice

    assert signed_in_user(request) == cast.alice


def test_an_anonymous_request_is_refused_rather_than_read_as_a_user():
    request = RequestFactory().get("/")
    request.user = AnonymousUser()

    with pytest.raises(PermissionDenied, match=NOT_SIGNED_IN):
        signed_in_user(request)
