from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from governance.efficiency.models import Finding
from governance.fleet.models import Cluster
from governance.org.models import Team
from governance.usage.models import Job


class RemediationPolicy(models.Model):
    """What a cluster does about idle GPUs: the condition, who it covers and spares, and how far it may go (`mode`).

    Opt-in: `off` by default; `dry_run` decides and records what it would do and does nothing; `notify` warns and
    stops there; `act` warns twice and then requeues, cancels or scales the job away if the condition still holds.
    """

    class Mode(models.TextChoices):
        OFF = "off"
        DRY_RUN = "dry_run", "Dry run"
        NOTIFY = "notify"
        ACT = "act"

    class Condition(models.TextChoices):
        IDLE_GPU = "idle_gpu", "Every GPU of the job idle for N hours"
        IDLE_AFTER_WORK = "idle_after_work", "Idle for N hours after doing work"
        INTERACTIVE_NIGHT = "interactive_night", "An interactive session idle for N hours at night"
        OVERALLOCATED = "overallocated", "Some GPUs idle for N hours while others work"

    class Scheduler(models.TextChoices):
        SLURM = "slurm"
        KUBERNETES = "kubernetes"

    class SlurmAction(models.TextChoices):
        REQUEUE = "requeue", "scontrol requeue"
        CANCEL = "cancel", "scancel"

    name = models.CharField(max_length=100, unique=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.OFF)
    condition = models.CharField(max_length=20, choices=Condition.choices, default=Condition.IDLE_GPU)
    idle_hours = models.DecimalField(
        max_digits=6,
        decimal_places=2,
        default=2,
        validators=[MinValueValidator(Decimal("0.25"))],
        help_text="N: how long the condition must hold (hours).",
    )
    teams = models.ManyToManyField(Team, blank=True, related_name="+", help_text="None: every team on the cluster.")
    partitions = models.JSONField(default=list, blank=True, help_text="Slurm partitions covered; empty: all.")
    namespaces = models.JSONField(default=list, blank=True, help_text="Kubernetes namespaces covered; empty: all.")
    exempt_labels = models.JSONField(default=list, blank=True, help_text='Job labels that exempt, as "key=value".')
    exempt_users = models.JSONField(default=list, blank=True)
    exempt_job_names = models.JSONField(default=list, blank=True, help_text="Job names (shell patterns) exempted.")
    grace_minutes = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1)],
        help_text="From the first warning to the second, and from the second to the action.",
    )
    quiet_start_hour = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(23)], help_text="UTC hour; none: no quiet hours."
    )
    quiet_end_hour = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(23)], help_text="UTC hour the quiet ends."
    )
    max_actions_per_hour = models.PositiveIntegerField(
        default=5, validators=[MinValueValidator(1)], help_text="Per cluster, over all its policies."
    )
    scheduler = models.CharField(max_length=12, choices=Scheduler.choices, default=Scheduler.SLURM)
    slurm_action = models.CharField(max_length=8, choices=SlurmAction.choices, default=SlurmAction.REQUEUE)
    api_url = models.URLField(
        max_length=300, blank=True, help_text="Kubernetes: the API server (the token is REMEDIATION_K8S_TOKEN_FILE)."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "remediation policies"
        ordering = ["cluster", "name"]
        constraints = [
            models.CheckConstraint(condition=Q(quiet_start_hour__lte=23), name="policy_quiet_start_is_an_hour"),
            models.CheckConstraint(condition=Q(quiet_end_hour__lte=23), name="policy_quiet_end_is_an_hour"),
            models.CheckConstraint(condition=Q(idle_hours__gt=0), name="policy_idle_hours_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.cluster.name}, {self.mode})"


class Remediation(models.Model):
    """One policy's case against one job: opened by the first warning (or the exemption), closed by the action,
    the job's recovery or its end. Written by the periodic check only."""

    class Stage(models.TextChoices):
        WARNED_ONCE = "warned_once", "Warned once"
        WARNED_TWICE = "warned_twice", "Warned twice"
        DUE = "due", "Deadline passed"
        CLOSED = "closed"

    class Outcome(models.TextChoices):
        NONE = "", "Pending"
        ACTED = "acted"
        FAILED = "failed"
        RECOVERED = "recovered"
        ENDED = "ended", "Job ended"
        EXEMPT = "exempt"
        SUPERSEDED = "superseded", "Policy mode changed"

    policy = models.ForeignKey(RemediationPolicy, on_delete=models.CASCADE, related_name="cases")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    finding = models.ForeignKey(Finding, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    dry_run = models.BooleanField(help_text="Opened under dry-run: nothing sent, nothing done.")
    stage = models.CharField(max_length=12, choices=Stage.choices)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.NONE, blank=True)
    first_warned_at = models.DateTimeField(null=True, blank=True)
    second_warned_at = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    reclaimed_gpu_hours = models.DecimalField(max_digits=14, decimal_places=4, default=0)
    reclaimed_cost = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    currency = models.CharField(max_length=3, default="USD")
    opened_at = models.DateTimeField()

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["policy", "job"], condition=~Q(stage="closed"), name="remediation_one_open_per_policy_job"
            ),
        ]
        indexes = [models.Index(fields=["stage"], condition=~Q(stage="closed"), name="remediation_open_idx")]

    def __str__(self) -> str:
        return f"{self.policy.name} on {self.job}: {self.stage} {self.outcome}".rstrip()


class RemediationStep(models.Model):
    """One decision of a case, as it was taken: the evidence then, the deadline, the command and its result."""

    class Decision(models.TextChoices):
        WARN = "warn", "First warning"
        WARN_AGAIN = "warn_again", "Second warning"
        ACT = "act", "Action"
        DUE = "due", "Deadline passed (notify only)"
        FAILED = "failed", "Action failed"
        RECOVERED = "recovered", "Recovered: left alone"
        ENDED = "ended", "Job ended"
        EXEMPT = "exempt", "Exempt: never touched"
        STALE = "stale", "Data stale: waiting"
        QUIET = "quiet", "Quiet hours: waiting"
        LIMIT = "limit", "Hourly limit reached: waiting"

    case = models.ForeignKey(Remediation, on_delete=models.CASCADE, related_name="steps")
    at = models.DateTimeField()
    decision = models.CharField(max_length=12, choices=Decision.choices)
    dry_run = models.BooleanField(help_text="What would have been done; nothing was sent or run.")
    evidence = models.JSONField(default=dict)
    deadline = models.DateTimeField(null=True, blank=True)
    command = models.CharField(max_length=500, blank=True)
    result = models.TextField(blank=True)
    gpu_hours = models.DecimalField(
        max_digits=14, decimal_places=4, default=0, help_text="Actions: GPU-hours reclaimed (or that would have been)."
    )
    cost = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    currency = models.CharField(max_length=3, default="USD")

    class Meta:
        ordering = ["case", "at", "id"]
        indexes = [models.Index(fields=["decision", "at"], name="remstep_decision_at_idx")]

    def __str__(self) -> str:
        return f"{self.case_id} {self.decision}{' (dry run)' if self.dry_run else ''} at {self.at:%Y-%m-%d %H:%M}"
