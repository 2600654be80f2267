"""The ledger summed per day for the pages: what a month's figures are read from instead of its job-days."""

from decimal import Decimal

from django.db import models
from django.db.models import Q

from governance.costs.models.common import HOURS, MONEY, Precision
from governance.costs.models.ledger import LineKind
from governance.fleet.models import Cluster


def _sum(precision: Precision) -> models.DecimalField:
    return models.DecimalField(**precision, default=Decimal(0))


class LedgerDay(models.Model):
    """The charge ledger's rows of one day, cluster, team, project, GPU model (and MIG profile) and kind of line,
    summed (hours, money, energy). Kept by the pricing pass in the transaction that writes the rows it sums
    (governance/costs/summaries.py), so a page reads a row per project and day instead of one per job-day;
    tests/invariants.py checks after every billing case that it equals the ledger.
    """

    Kind = LineKind

    month = models.DateField(help_text="The billing month (its first day).")
    day = models.DateField()
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    cluster_name = models.CharField(max_length=200)
    team = models.ForeignKey(
        "org.Team", on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="+"
    )
    team_name = models.CharField(max_length=200, blank=True)
    project = models.ForeignKey(
        "org.Project", on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="+"
    )
    project_name = models.CharField(max_length=200, blank=True)
    gpu_model = models.CharField(max_length=200, blank=True)
    mig_profile = models.CharField(max_length=32, blank=True)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    corrected_kind = models.CharField(max_length=12, blank=True)
    billed = models.BooleanField(default=True)
    currency = models.CharField(max_length=3)
    rows = models.PositiveIntegerField(help_text="How many ledger rows the sums are of.")
    gpu_hours = _sum(HOURS)
    used_gpu_hours = _sum(HOURS)
    idle_gpu_hours = _sum(HOURS)
    cost = _sum(MONEY)
    idle_cost = _sum(MONEY)
    energy_kwh = _sum(HOURS)
    energy_cost = _sum(MONEY)
    carbon_kg = _sum(HOURS)
    list_cost = _sum(MONEY)
    contracted_cost = _sum(MONEY)
    billed_cost = _sum(MONEY)
    commitment_gpu_hours = _sum(HOURS)
    shared_gpu_hours = _sum(HOURS)  # of the rows on a share of one GPU (gpu_share set): the team month's part
    shared_cost = _sum(MONEY)

    class Meta:
        ordering = ["month", "day", "cluster_name", "team_name", "gpu_model", "kind"]
        indexes = [
            models.Index(fields=["month", "team"], name="ledgerday_month_team_idx"),
            models.Index(fields=["cluster", "day"], name="ledgerday_cluster_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.cluster_name} {self.team_name} {self.gpu_model} {self.kind}: {self.cost}"


class JobMonth(models.Model):
    """A job's usage rows of one month summed, per team, user and cluster the rows name (a job re-attributed
    mid-month has a row per team): a month's jobs ranked by cost or idle cost, and its cost by user, read a row per
    job instead of one per job-day. Kept with `LedgerDay` by the pricing pass (governance/costs/summaries.py);
    tests/invariants.py checks that it equals the ledger."""

    month = models.DateField(help_text="The billing month (its first day).")
    job = models.ForeignKey("usage.Job", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    job_ref = models.CharField(max_length=200, blank=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.DO_NOTHING, db_constraint=False, null=True, related_name="+")
    cluster_name = models.CharField(max_length=200)
    team = models.ForeignKey(
        "org.Team", on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="+"
    )
    team_name = models.CharField(max_length=200, blank=True)
    project_name = models.CharField(max_length=200, blank=True)
    user_name = models.CharField(max_length=200, blank=True)
    currency = models.CharField(max_length=3)
    first_day = models.DateField(
        help_text="The first day it has rows on: a pass re-sums the jobs of the days it wrote."
    )
    last_day = models.DateField()
    rows = models.PositiveIntegerField(help_text="How many ledger rows the sums are of.")
    job_rows = models.PositiveIntegerField(
        default=1, help_text="How many rows the job has this month (more than one: re-attributed mid-month)."
    )
    gpu_hours = _sum(HOURS)
    used_gpu_hours = _sum(HOURS)
    idle_gpu_hours = _sum(HOURS)
    cost = _sum(MONEY)
    idle_cost = _sum(MONEY)

    class Meta:
        ordering = ["month", "job"]
        indexes = [
            models.Index(fields=["month", "team"], name="jobmonth_month_team_idx"),
            models.Index(fields=["job", "month"], name="jobmonth_job_month_idx"),
            models.Index(fields=["cluster", "first_day"], name="jobmonth_cluster_first_idx"),
            # A month's costliest jobs read in order: a job of one row ranks by its row (breakdowns.jobs_month);
            # the few of several rows are summed.
            models.Index(fields=["month", "-cost", "job"], condition=Q(job_rows=1), name="jobmonth_month_cost_idx"),
            models.Index(
                fields=["month", "-idle_cost", "job"], condition=Q(job_rows=1), name="jobmonth_month_idle_idx"
            ),
            models.Index(fields=["month", "job"], condition=Q(job_rows__gt=1), name="jobmonth_month_split_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.cluster_name}/{self.job_ref} {self.team_name}: {self.cost}"
