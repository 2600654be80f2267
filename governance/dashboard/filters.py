"""The dashboard's filters, read from the query string so that a view can be shared as a link."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.utils import timezone

from governance.fleet.models import Cluster
from governance.lib.months import Month
from governance.lib.ranges import FIRST_YEAR, LAST_YEAR, MAX_RANGE_DAYS, year_problem
from governance.org.models import Team, User
from governance.org.selectors import teams_visible

MONTHS_SHOWN = 6
# ?range=: the last N hours up to now, for a wall screen that refreshes.
RELATIVE_RANGES = {"24h": ("last 24 h", timedelta(hours=24)), "7d": ("last 7 days", timedelta(days=7)),
                   "30d": ("last 30 days", timedelta(days=30))}  # fmt: skip
UNKNOWN_CLUSTER = "cluster {value!r} does not exist; showing every cluster"
UNKNOWN_TEAM = "team {value!r} is not one you may see; showing every team you may see"
BAD_MONTH = "month {value!r} is not of the form YYYY-MM; showing the current month"
BAD_DATE = "{name} {value!r} is not a date of the form YYYY-MM-DD; ignored"
BAD_RANGE = "the time range ends before it starts; showing the month instead"
BAD_YEAR = "{name} {value!r} is outside the years {first} to {last}; ignored"
RANGE_CLAMPED = "a range may cover at most {days} days; showing the {days} days from {start:%Y-%m-%d}"


@dataclass
class Filters:
    """What the user asked for (cluster, team, month, time range), checked against what they may see."""

    month: Month
    start: datetime
    end: datetime
    cluster: Cluster | None = None
    team: Team | None = None
    teams: QuerySet[Team] | None = None
    clusters: QuerySet[Cluster] | None = None
    custom_range: bool = False
    relative: str = ""
    errors: list[str] = field(default_factory=list)

    @property
    def months(self) -> list[Month]:
        months = [self.month]
        for _ in range(MONTHS_SHOWN - 1):
            months.insert(0, months[0].previous())
        return months

    @property
    def cluster_id(self) -> int | None:
        return self.cluster.pk if self.cluster else None

    @property
    def end_inclusive(self) -> datetime:
        return self.end - timedelta(days=1)

    @property
    def period(self) -> str:
        if self.relative:
            return f"{RELATIVE_RANGES[self.relative][0]} to {self.end:%Y-%m-%d %H:%M} UTC"
        if not self.custom_range:
            return str(self.month)
        return f"{self.start:%Y-%m-%d} to {self.end_inclusive:%Y-%m-%d}"

    def query(self, **changes: str) -> str:
        """The query string of these filters (with `changes`), for links and CSV endpoints."""
        params = {"month": str(self.month)}
        if self.cluster:
            params["cluster"] = self.cluster.name
        if self.team:
            params["team"] = self.team.slug
        if self.relative:
            params["range"] = self.relative
        elif self.custom_range:
            params["start"] = f"{self.start:%Y-%m-%d}"
            params["end"] = f"{self.end_inclusive:%Y-%m-%d}"
        params.update(changes)
        return urlencode({k: v for k, v in params.items() if v})


def _day(name: str, value: str, errors: list[str]) -> datetime | None:
    if not value:
        return None
    try:
        day = datetime.combine(date.fromisoformat(value), time(0), tzinfo=UTC)
    except ValueError:
        errors.append(BAD_DATE.format(name=name, value=value))
        return None
    if year_problem(day):
        errors.append(BAD_YEAR.format(name=name, value=value, first=FIRST_YEAR, last=LAST_YEAR))
        return None
    return day


def filters_parse(*, query: Mapping[str, str], user: User, now: datetime | None = None) -> Filters:
    """Filters from a query string; a value the user may not use is dropped with a message, never obeyed."""
    errors: list[str] = []
    # A NUL byte reaches no query (PostgreSQL text cannot hold one): dropped here, the rest is looked up as usual.
    query = {k: str(v).replace("\x00", "") for k, v in query.items()}
    month = Month.of(now or timezone.now())
    if query.get("month"):
        try:
            month = Month.parse(query["month"])
        except ValueError:
            errors.append(BAD_MONTH.format(value=query["month"]))
    teams = teams_visible(user=user)
    clusters = Cluster.objects.order_by("name")
    cluster = team = None
    if query.get("cluster"):
        cluster = clusters.filter(name=query["cluster"]).first()
        if cluster is None:
            errors.append(UNKNOWN_CLUSTER.format(value=query["cluster"]))
    if query.get("team"):
        team = teams.filter(slug=query["team"]).first()
        if team is None:
            errors.append(UNKNOWN_TEAM.format(value=query["team"]))
    start = _day("start", query.get("start", ""), errors)
    last = _day("end", query.get("end", ""), errors)
    custom = start is not None or last is not None
    first = start or last
    if first is not None and not query.get("month"):
        month = Month.of(first)
    start = start or month.start
    end = last + timedelta(days=1) if last else (month.end if start < month.end else start + timedelta(days=31))
    if end <= start:
        errors.append(BAD_RANGE)
        start, end, custom = month.start, month.end, False
    relative = query.get("range", "")
    if relative in RELATIVE_RANGES:
        current = now or timezone.now()
        end = current.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        start, custom, month = end - RELATIVE_RANGES[relative][1], True, Month.of(current)
    else:
        relative = ""
    if end - start > timedelta(days=MAX_RANGE_DAYS):
        errors.append(RANGE_CLAMPED.format(days=MAX_RANGE_DAYS, start=start))
        end = start + timedelta(days=MAX_RANGE_DAYS)
    return Filters(
        month=month, start=start, end=end, cluster=cluster, team=team, teams=teams, clusters=clusters,
        custom_range=custom, relative=relative, errors=errors,
    )  # fmt: skip
