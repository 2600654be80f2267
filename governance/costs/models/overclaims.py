"""GPU-hours claimed on a cluster beyond the GPUs that exist (stored, shown to admins, never billed), and what
allocation billed each job hour by hour where it had to decide."""

from django.db import models

from governance.costs.models.common import HOURS
from governance.fleet.models import Cluster


class OverClaim(models.Model):
    """What the jobs whose records one token wrote claimed on a cluster's GPUs of one model on one day beyond what
    the cluster has, after allocation (governance/costs/allocation.py): claimed - billed. `jobs` lists each job's
    part: [{"job": ref, "claimed": hours, "billed": hours}], largest over-claim first."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    gpu_model = models.CharField(max_length=200)
    token = models.ForeignKey("api.ApiToken", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    token_name = models.CharField(max_length=200, blank=True, help_text="Empty: an import, or samples only.")
    claimed_gpu_hours = models.DecimalField(**HOURS)
    billed_gpu_hours = models.DecimalField(**HOURS)
    overclaimed_gpu_hours = models.DecimalField(**HOURS)
    jobs = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-day", "cluster", "gpu_model", "token_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "day", "gpu_model", "token"], name="overclaim_unique", nulls_distinct=False
            ),
            models.CheckConstraint(condition=models.Q(overclaimed_gpu_hours__gt=0), name="overclaim_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster} {self.day} {self.gpu_model}: {self.overclaimed_gpu_hours} GPU-h over-claimed"


class AllocatedHour(models.Model):
    """What allocation billed one job in one hour of a contended cluster-day (claims beyond the GPUs that exist,
    GPUs shared or unconfirmed): the hours of the job's usage rows of that day. Elsewhere a job-day is billed its
    full claim, hour by hour, and no row is kept."""

    job = models.ForeignKey("usage.Job", on_delete=models.CASCADE, related_name="+")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    hour = models.DateTimeField()
    gpu_model = models.CharField(max_length=200)
    mig_profile = models.CharField(max_length=32, blank=True)
    gpu_hours = models.DecimalField(**HOURS)

    class Meta:
        ordering = ["hour"]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "day", "hour", "gpu_model", "mig_profile"], name="allocatedhour_unique"
            ),
        ]
        indexes = [models.Index(fields=["cluster", "hour"], name="allocatedhour_cluster_hour_idx")]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.hour:%Y-%m-%d %H}h: {self.gpu_hours} GPU-h"
