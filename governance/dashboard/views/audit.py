"""The audit log for platform admins: every change through any door, filtered, paginated, exportable as CSV."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render

from governance.api.audit_search import AuditEntryFilter, audit_csv
from governance.api.models import AuditEntry
from governance.api.selectors import audit_entries_visible
from governance.org.auth import signed_in_user

PAGE_SIZE = 50


def _entries(request: HttpRequest) -> tuple[AuditEntryFilter, QuerySet[AuditEntry]]:
    user = signed_in_user(request)
    if not user.is_platform_admin:
        raise PermissionDenied("Only platform admins read the audit log.")
    found = AuditEntryFilter(request.GET, queryset=audit_entries_visible(user=user))
    return found, found.qs if found.is_valid() else AuditEntry.objects.none()


@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    found, entries = _entries(request)
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"filter": found, "page": page, "query": query.urlencode(), "doors": AuditEntry.Door.choices}
    return render(request, "dashboard/audit.html", context)


@login_required
def audit_log_csv(request: HttpRequest) -> StreamingHttpResponse:
    _, entries = _entries(request)
    response = StreamingHttpResponse(audit_csv(entries.iterator(chunk_size=2000)), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="audit.csv"'
    return response
