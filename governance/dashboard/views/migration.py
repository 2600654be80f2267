"""The migration check page of a project (and its CSV): its work on each cluster and GPU model side by side."""

import csv
from collections.abc import Iterator

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render

from governance.efficiency.migration import DEFAULT_DAYS, MAX_DAYS, migration_check, migration_csv_rows
from governance.org.auth import signed_in_user
from governance.org.models import Project
from governance.org.selectors import teams_visible

WINDOWS = (30, 90, 180)


class _Echo:
    def write(self, value: str) -> str:
        return value


def _project(request: HttpRequest, slug: str) -> Project:
    """The project if the reader may see its team's totals; 404 otherwise (its existence is not told)."""
    project = Project.objects.select_related("team").filter(slug=slug).first()
    if project is None or not teams_visible(user=signed_in_user(request)).filter(pk=project.team_id).exists():
        raise Http404("No such project.")
    return project


def _days(request: HttpRequest) -> int:
    text = request.GET.get("days", "")
    if not text:
        return DEFAULT_DAYS
    if not text.isdigit() or not 1 <= int(text) <= MAX_DAYS:
        raise Http404(f"days: a whole number of days from 1 to {MAX_DAYS}")
    return int(text)


@login_required
def project_migration(request: HttpRequest, slug: str) -> HttpResponse:
    project = _project(request, slug)
    days = _days(request)
    check = migration_check(project=project, days=days)
    return render(
        request, "efficiency/migration.html", {"project": project, "check": check, "days": days, "windows": WINDOWS}
    )


@login_required
def project_migration_csv(request: HttpRequest, slug: str) -> StreamingHttpResponse:
    project = _project(request, slug)
    check = migration_check(project=project, days=_days(request))
    writer = csv.writer(_Echo())
    lines: Iterator[str] = (writer.writerow(row) for row in migration_csv_rows(check))
    response = StreamingHttpResponse(lines, content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="migration-{project.slug}-{check.first}-{check.last}.csv"'
    return response
