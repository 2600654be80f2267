"""Filter types shared by every domain's filtersets, and the backend that refuses query parameters no list takes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from django import forms
from django.db.models import QuerySet
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend
from rest_framework.request import Request
from rest_framework.settings import api_settings

from governance.fleet.models import Cluster
from governance.org.models import Project, Team
from governance.org.selectors import teams_visible

OUT_OF_RANGE = "This time cannot be expressed in UTC; use a time between years 1 and 9999."
UNKNOWN_PARAMETER = "This list takes no such query parameter; it takes: {allowed}."


class UtcIsoDateTimeField(IsoDateTimeField):
    """ISO 8601, converted to UTC (PostgreSQL refuses offsets past 15:59 that Python accepts)."""

    def to_python(self, value: str | datetime | date | None) -> datetime | None:
        parsed = super().to_python(value)
        try:
            return parsed.astimezone(UTC) if parsed is not None and parsed.tzinfo else parsed
        except OverflowError:
            raise forms.ValidationError(OUT_OF_RANGE, code="invalid") from None


class UtcIsoDateTimeFilter(filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


@extend_schema_field(OpenApiTypes.INT)
class IdFilter(filters.NumberFilter):
    """A database id: a whole number from 1 to the largest bigint (else 400 naming the filter)."""

    field_class = forms.IntegerField  # type: ignore[assignment]  # a whole number, not a decimal

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{"min_value": 1, "max_value": 2**63 - 1, **kwargs})


class KnownNameFilter(filters.CharFilter):
    """A filter by a name that must name an object the user may see: an unknown one is a 400 naming the field
    (not an empty list that reads as "nothing there"). `known(request)` gives the objects, `lookup` the name's
    field on them."""

    def __init__(
        self, *args: Any, known: Callable[[Request | None], QuerySet], lookup: str, unknown: str, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.known, self.lookup, self.unknown = known, lookup, unknown

    @property
    def field(self) -> forms.Field:
        if not hasattr(self, "_field"):
            super().field.validators.append(self._check)
        return self._field  # type: ignore[attr-defined]  # set by Filter.field

    def _check(self, value: str) -> None:
        if "\x00" in value:  # refused by the field's own validator; PostgreSQL text cannot hold it
            return
        request = getattr(getattr(self, "parent", None), "request", None)  # the FilterSet's, once bound
        if not self.known(request).filter(**{self.lookup: value}).exists():
            raise forms.ValidationError(self.unknown, code="unknown", params={"value": value})


def _teams_known(request: Request | None) -> QuerySet[Team]:
    user = getattr(request, "user", None)
    return teams_visible(user=user) if user is not None else Team.objects.none()


def team_filter(field_name: str, **kwargs: Any) -> KnownNameFilter:
    """`?team=<slug>`: one of the teams the user may see, else 400."""
    kwargs.setdefault("help_text", "Team slug; one you may see, else 400.")
    unknown = "No team you may see has the slug '%(value)s'."
    return KnownNameFilter(field_name=field_name, known=_teams_known, lookup="slug", unknown=unknown, **kwargs)


def _projects_known(request: Request | None) -> QuerySet[Project]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return Project.objects.none()
    return Project.objects.all() if user.sees_all_costs else Project.objects.filter(team__in=teams_visible(user=user))


def project_filter(field_name: str, **kwargs: Any) -> KnownNameFilter:
    """`?project=<slug>`: a project of a team the user may see (any, for admins and finance), else 400."""
    kwargs.setdefault("help_text", "Project slug; one you may see, else 400.")
    unknown = "No project you may see has the slug '%(value)s'."
    return KnownNameFilter(field_name=field_name, known=_projects_known, lookup="slug", unknown=unknown, **kwargs)


def cluster_filter(field_name: str, **kwargs: Any) -> KnownNameFilter:
    """`?cluster=<name>`: a cluster that exists, else 400."""
    kwargs.setdefault("help_text", "Cluster name; an unknown one is a 400.")
    return KnownNameFilter(
        field_name=field_name, known=lambda request: Cluster.objects.all(), lookup="name",
        unknown="No cluster is named '%(value)s'.", **kwargs,
    )  # fmt: skip


# --- Unknown query parameters ---------------------------------------------------------------------------

_PAGINATION_PARAMETERS = ("page_query_param", "page_size_query_param", "limit_query_param", "offset_query_param")
_BACKEND_PARAMETERS = ("ordering_param", "search_param")


def query_parameters_of(request: Request, queryset: Any, view: Any) -> set[str]:
    """The query parameters a list takes: its filters, the ordering and paging ones, `format`, and any the view
    names in `query_parameters` (what it reads itself, like `month`)."""
    known = {api_settings.URL_FORMAT_OVERRIDE, *getattr(view, "query_parameters", ())}
    paginator = getattr(view, "paginator", None)
    known |= {getattr(paginator, attr) for attr in _PAGINATION_PARAMETERS if getattr(paginator, attr, None)}
    for backend_class in getattr(view, "filter_backends", ()):
        backend = backend_class()
        known |= {getattr(backend, attr) for attr in _BACKEND_PARAMETERS if getattr(backend, attr, None)}
        if isinstance(backend, filters.DjangoFilterBackend) and isinstance(queryset, QuerySet):
            filterset = backend.get_filterset(request, queryset, view)
            if filterset is None:
                continue
            form = filterset.form
            for name, field in form.fields.items():
                key = form.add_prefix(name)
                suffixes = getattr(field.widget, "suffixes", None)
                known |= {f"{key}_{s}" if s else key for s in suffixes} if suffixes else {key}
    known.discard(None)
    return known


class KnownQueryParameters(BaseFilterBackend):
    """Refuses a list request with a query parameter the list does not take: 400 naming each one and what it
    takes, so a misspelt filter (`?teem=nlp`) is not an unfiltered answer. Details (one object) are not checked."""

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        lookup = getattr(view, "lookup_url_kwarg", None) or getattr(view, "lookup_field", None)
        if lookup and lookup in getattr(view, "kwargs", {}):
            return queryset
        known = query_parameters_of(request, queryset, view)
        unknown = sorted(set(request.query_params) - known)
        if unknown:
            message = UNKNOWN_PARAMETER.format(allowed=", ".join(sorted(known)))
            raise ValidationError({name[:100]: [message] for name in unknown})
        return queryset
