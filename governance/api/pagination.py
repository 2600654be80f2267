"""Page-number pagination that refuses an unordered queryset (pages of one would overlap)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

if TYPE_CHECKING:
    from rest_framework.views import APIView

UNORDERED = "{view} paginates an unordered queryset; give the model or the queryset an ordering."


class OrderedPageNumberPagination(PageNumberPagination):
    page_size_query_param = "page_size"

    @property
    def page_size(self) -> int:  # type: ignore[override]
        return settings.API_PAGE_SIZE

    @property
    def max_page_size(self) -> int:  # type: ignore[override]
        return settings.API_MAX_PAGE_SIZE

    def paginate_queryset(self, queryset, request: Request, view: APIView | None = None):
        if isinstance(queryset, QuerySet) and not queryset.ordered:
            raise ImproperlyConfigured(UNORDERED.format(view=type(view).__name__))
        return super().paginate_queryset(queryset, request, view)
