from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from governance.api.models import ApiToken
from governance.fleet.models import Cluster, Gpu
from governance.org.models import Project


class Job(models.Model):
    """One scheduler job (Slurm job, Kubernetes pod), as its collectors last described it."""

    class State(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        TIMEOUT = "timeout"
        PREEMPTED = "preempted"
        NODE_FAIL = "node_fail"
        OUT_OF_MEMORY = "out_of_memory"

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="jobs")
    external_id = models.CharField(max_length=200, help_text="The scheduler's job id.")
    user_name = models.CharField(max_length=200, blank=True)
    account = models.CharField(max_length=200, blank=True, help_text="Project as the scheduler names it.")
    team_name = models.CharField(max_length=200, blank=True, help_text="Team as the record named it, if any.")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, null=True, blank=True, related_name="jobs")
    gpus = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True,
        help_text="GPUs the scheduler declares, or the share of one GPU a job holds (0.47: time-slicing, MPS, a"
        " fractional request); null where no source knows the count.",
    )  # fmt: skip
    gpu_model = models.CharField(max_length=200, blank=True)
    submit_time = models.DateTimeField(null=True, blank=True)
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    labels = models.JSONField(default=dict, blank=True)
    runs = models.JSONField(
        default=list, blank=True, db_default=models.Value([], output_field=models.JSONField()),
        help_text="The job's runs as [start, end or null] pairs (ISO 8601), where it ran more than once (a requeued"
        " Slurm job); empty: it ran once, from start_time to end_time. Only the runs are billed.",
    )  # fmt: skip
    described = models.BooleanField(
        default=False, help_text="False while only samples have named this job (no job record yet)."
    )
    source_token = models.ForeignKey(
        "api.ApiToken", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
        help_text="The ingest token whose batch last wrote the job's record (none: an import, or samples only).",
    )  # fmt: skip
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-start_time", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "external_id"], name="job_unique_cluster_external_id"),
            models.CheckConstraint(condition=Q(gpus__gte=0), name="job_gpus_not_negative"),
        ]
        indexes = [
            models.Index(fields=["start_time", "end_time"], name="job_time_idx"),
            models.Index(fields=["project", "start_time"], name="job_project_start_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.external_id}"


class IngestBatch(models.Model):
    """A batch as the API or an import received it: stored before 202, processed once by a worker."""

    class Format(models.TextChoices):
        JSON = "json", "JSON, exactly as received and validated"
        PREPARED = "prepared", "Prepared: header and binary COPY rows (governance/usage/prepared.py)"

    class Source(models.TextChoices):
        API = "api", "The ingest API (a collector's token)"
        IMPORT = "import", "manage.py import_usage (an operator)"

    batch_id = models.UUIDField(unique=True)
    collector = models.CharField(max_length=200)
    source = models.CharField(
        max_length=8,
        choices=Source.choices,
        default=Source.API,
        help_text="Only an operator's import may create the teams and projects its records name.",
    )
    format = models.CharField(max_length=16, choices=Format.choices, default=Format.JSON)
    body = models.BinaryField(help_text="The batch, in the form `format` names.")
    body_sha256 = models.CharField(max_length=64, help_text="SHA-256 of the JSON as received.")
    record_count = models.PositiveIntegerField()
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    dead_at = models.DateTimeField(
        null=True, blank=True, help_text="Set after INGEST_MAX_ATTEMPTS failures: never swept again until re-queued."
    )
    token = models.ForeignKey(
        ApiToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False,
        help_text="The token that sent it (the API); empty for an operator's import.",
    )  # fmt: skip

    class Meta:
        verbose_name = "ingest batch"
        verbose_name_plural = "ingest batches"
        ordering = ["received_at"]
        indexes = [
            models.Index(
                fields=["received_at"],
                condition=Q(processed_at__isnull=True, dead_at__isnull=True),
                name="ingestbatch_pending_idx",
            ),
            models.Index(fields=["dead_at"], condition=Q(dead_at__isnull=False), name="ingestbatch_dead_idx"),
        ]

    def __str__(self) -> str:
        return str(self.batch_id)


class Sample(models.Model):
    """One reading of one GPU at one time (append-only raw data, kept for the retention period).

    On PostgreSQL the table is partitioned by month on ts (migration 0003, governance/usage/partitions.py)
    and carries no primary key constraint (migration 0006): everything that reads usage reads the hourly
    rollups. The ORM still addresses rows by id, which the sequence keeps unique; a BRIN index on ts serves
    range deletes. Its one B-tree index is the unique (gpu, ts) below, which the writer needs to store a
    reading once.
    """

    ts = models.DateTimeField()
    # Nothing reads raw samples by GPU either (heatmaps read GpuHour): no index.
    gpu = models.ForeignKey(Gpu, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+")
    # Nothing reads raw samples by job (reports read the rollups), so no index on job either.
    job = models.ForeignKey(
        Job, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, null=True, related_name="+"
    )
    # Every reading may be unknown (null), never zero instead: a trimmed exporter leaves metrics out.
    sm_util = models.FloatField(null=True)
    mem_used_mib = models.FloatField(null=True)
    mem_total_mib = models.FloatField(null=True)
    power_w = models.FloatField(null=True)
    gpu_numa_node = models.SmallIntegerField(null=True)
    cpu_numa_mask = models.BigIntegerField(null=True, help_text="Bit n set: the job's CPUs may run on NUMA node n.")
    mem_util = models.FloatField(null=True)
    tensor_active = models.FloatField(null=True)
    dram_active = models.FloatField(null=True)
    pcie_rx_mibps = models.FloatField(null=True)
    pcie_tx_mibps = models.FloatField(null=True)
    nvlink_mibps = models.FloatField(null=True)
    host_cpu_util = models.FloatField(null=True)
    io_wait = models.FloatField(null=True)
    # On a shared GPU split by process: the SM of the sample's job's own processes (sm_util is the GPU's).
    job_sm_util = models.FloatField(null=True)

    class Meta:
        # A GPU's reading at one moment is stored once, whatever batch brought it (a collector replaying its
        # spool under new batch ids). The one B-tree index the table keeps: the writer inserts with
        # ON CONFLICT DO NOTHING and folds only the rows it wrote into the rollups. It holds ts, the partition
        # key, so PostgreSQL keeps it per monthly partition.
        constraints = [models.UniqueConstraint(fields=["gpu", "ts"], name="sample_unique_gpu_ts")]

    def __str__(self) -> str:
        return f"GPU {self.gpu_id} at {self.ts:%Y-%m-%d %H:%M:%S}: {self.sm_util}% SM"


class JobGpuHour(models.Model):
    """What one GPU did for one job in one hour: the rollup that reports, findings and costs read."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="hours")
    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="job_hours")
    hour = models.DateTimeField()
    samples = models.PositiveIntegerField()
    sm_samples = models.PositiveIntegerField(db_default=0, help_text="Samples that knew SM: the mean's divisor.")
    idle_samples = models.PositiveIntegerField(help_text="Samples under the idle SM threshold (a null SM is not).")
    sm_sum = models.FloatField()
    sm_max = models.FloatField(null=True)
    sm_sq_sum = models.FloatField(help_text="Sum of squares, for the SM spread (oscillation).")
    mem_used_max = models.FloatField(null=True)
    mem_total_mib = models.FloatField(null=True)
    power_sum = models.FloatField()
    power_samples = models.PositiveIntegerField()
    numa_mismatch_samples = models.PositiveIntegerField(help_text="Samples whose job CPUs exclude the GPU's node.")
    io_wait_sum = models.FloatField()
    io_wait_samples = models.PositiveIntegerField()
    host_cpu_sum = models.FloatField()
    host_cpu_samples = models.PositiveIntegerField()
    tensor_sum = models.FloatField()
    tensor_samples = models.PositiveIntegerField()
    # GPM/DCGM profiling where the source gives them (unknown otherwise: no samples, not 0).
    dram_sum = models.FloatField(db_default=0.0, help_text="Sum of DRAM active % (memory bandwidth in use).")
    dram_samples = models.PositiveIntegerField(db_default=0)
    nvlink_sum = models.FloatField(db_default=0.0, help_text="Sum of NVLink throughput, MiB/s (rx + tx).")
    nvlink_samples = models.PositiveIntegerField(db_default=0)
    pcie_sum = models.FloatField(db_default=0.0, help_text="Sum of PCIe throughput, MiB/s (rx + tx).")
    pcie_samples = models.PositiveIntegerField(db_default=0)
    # On a GPU shared with other jobs, the job's own processes' SM where the source split the GPU by process.
    job_sm_sum = models.FloatField(db_default=0.0, help_text="Sum of the job's own SM % on a shared GPU.")
    job_sm_samples = models.PositiveIntegerField(db_default=0, help_text="Samples that knew the job's own SM.")

    class Meta:
        verbose_name = "job GPU-hour"
        verbose_name_plural = "job GPU-hours"
        ordering = ["hour"]
        constraints = [models.UniqueConstraint(fields=["job", "gpu", "hour"], name="jobgpuhour_unique")]
        indexes = [models.Index(fields=["hour"], name="jobgpuhour_hour_idx")]

    def __str__(self) -> str:
        return f"job {self.job_id} GPU {self.gpu_id} {self.hour:%Y-%m-%d %H}h"


class GpuHour(models.Model):
    """What one GPU did in one hour, allocated or not: cluster utilisation and heatmaps read this."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="hours")
    hour = models.DateTimeField()
    samples = models.PositiveIntegerField()
    allocated_samples = models.PositiveIntegerField()
    sm_samples = models.PositiveIntegerField(db_default=0, help_text="Samples that knew SM: the mean's divisor.")
    idle_samples = models.PositiveIntegerField()
    sm_sum = models.FloatField()
    mem_used_max = models.FloatField(null=True)
    power_sum = models.FloatField()
    power_samples = models.PositiveIntegerField()

    class Meta:
        verbose_name = "GPU-hour"
        verbose_name_plural = "GPU-hours"
        ordering = ["hour"]
        constraints = [models.UniqueConstraint(fields=["gpu", "hour"], name="gpuhour_unique")]
        indexes = [models.Index(fields=["hour"], name="gpuhour_hour_idx")]

    def __str__(self) -> str:
        return f"GPU {self.gpu_id} {self.hour:%Y-%m-%d %H}h"


class ClusterHour(models.Model):
    """A cluster's utilisation in one hour, from its GPU-hours: the GPUs that reported and the sum of their mean SM
    (as GPU-hours used). Kept by the pricing pass for the cluster-days ingest marked (governance/usage/utilisation.py),
    so the overview reads a row per cluster-hour, not one per GPU-hour."""

    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    gpus = models.PositiveIntegerField(help_text="GPUs with samples in the hour (capacity, GPU-hours).")
    used_gpu_hours = models.FloatField(help_text="Sum over those GPUs of their mean SM / 100.")

    class Meta:
        verbose_name = "cluster-hour"
        ordering = ["hour"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hour"], name="clusterhour_unique")]
        indexes = [models.Index(fields=["hour"], name="clusterhour_hour_idx")]

    def __str__(self) -> str:
        return f"cluster {self.cluster_id} {self.hour:%Y-%m-%d %H}h"


class NodeSums(models.Model):
    """A node's GPU-hours summed over a span (the rollups below): samples, the samples that knew SM, their SM sum."""

    node = models.ForeignKey("fleet.Node", on_delete=models.CASCADE, related_name="+")
    samples = models.PositiveBigIntegerField()
    sm_samples = models.PositiveBigIntegerField()
    sm_sum = models.FloatField()

    class Meta:
        abstract = True


class NodeHour(NodeSums):
    """What one node's GPUs did in one hour, summed from its GPU-hours: the SM sum and the samples that knew SM,
    so a heatmap cell of several nodes is their SM mean. Folded by ingest in the transaction that upserts the
    GPU-hours (governance/usage/writer/rollups.py), so the cluster heatmap reads a row per node-hour."""

    hour = models.DateTimeField()

    class Meta:
        verbose_name = "node-hour"
        ordering = ["hour"]
        constraints = [models.UniqueConstraint(fields=["node", "hour"], name="nodehour_unique")]

    def __str__(self) -> str:
        return f"node {self.node_id} {self.hour:%Y-%m-%d %H}h"


class NodeDay(NodeSums):
    """A node's GPU-hours summed over one UTC day, as `NodeHour` sums them over an hour: the heatmap's daily
    columns read a row per node-day. Folded by ingest with `NodeHour`."""

    day = models.DateField()

    class Meta:
        verbose_name = "node-day"
        ordering = ["day"]
        constraints = [models.UniqueConstraint(fields=["node", "day"], name="nodeday_unique")]

    def __str__(self) -> str:
        return f"node {self.node_id} {self.day}"


class PricingMark(models.Model):
    """A day whose charges ingest (or a change of a job) touched: the worker re-prices it and deletes the mark.

    A mark with a job re-prices that job's day; one without re-prices the cluster's capacity for the day (new
    GPUs, GPUs seen again). Marks are appended, never updated, so ingest never waits on pricing.
    """

    job = models.ForeignKey(Job, on_delete=models.DO_NOTHING, db_constraint=False, null=True, related_name="+")
    cluster = models.ForeignKey(Cluster, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    day = models.DateField()
    # Set by the database, so ingest's INSERT ... SELECT and every bulk_create stamp it alike: /metrics reads the
    # pricing lag (gg_pricing_lag_seconds) from the oldest mark left.
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        # The worker claims marks oldest day first (costs.reprice.CLAIM): read in that order, a claim costs what it
        # takes, not a sort of every mark left.
        indexes = [models.Index(fields=["day", "cluster", "id"], name="pricingmark_claim_idx")]

    def __str__(self) -> str:
        return f"reprice {'job ' + str(self.job_id) if self.job_id else 'cluster ' + str(self.cluster_id)} {self.day}"


class JobChange(models.Model):
    """One fact of a job that changed after the job was on a bill (it had started): the old and the new value, when,
    through which door and by whom (for ingest: the token that sent the record). Written with the change."""

    class Field(models.TextChoices):
        PROJECT = "project"
        TEAM = "team"
        USER = "user"
        GPUS = "gpus", "GPUs"
        START = "start_time", "Start"
        END = "end_time", "End"
        STATE = "state"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="changes")
    at = models.DateTimeField(default=timezone.now)
    field = models.CharField(max_length=16, choices=Field.choices)
    old_value = models.JSONField(null=True, blank=True, help_text="Null: unknown or none.")
    new_value = models.JSONField(null=True, blank=True)
    door = models.CharField(max_length=8, help_text="ingest, task, command, page, admin or api (as in the audit log).")
    actor_name = models.CharField(max_length=150, blank=True)
    token = models.ForeignKey(ApiToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    token_name = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["job", "-at", "-id"]
        indexes = [models.Index(fields=["job", "at"], name="jobchange_job_at_idx")]

    def __str__(self) -> str:
        return f"{self.job_id} {self.field}: {self.old_value} -> {self.new_value}"


class CollectorStatus(models.Model):
    """The last batch each collector sent, kept by the periodic check (usage.check_collectors) from the inbox; a
    collector silent for INGEST_SILENT_INTERVALS intervals is announced once (`silent_since`) until it sends again."""

    collector = models.CharField(max_length=200, unique=True)
    last_batch_at = models.DateTimeField()
    last_batch_pk = models.BigIntegerField(help_text="The newest inbox batch seen: the next check reads past it.")
    silent_since = models.DateTimeField(
        null=True, blank=True, help_text="When its silence was announced; cleared by its next batch."
    )

    class Meta:
        verbose_name = "collector"
        verbose_name_plural = "collectors"
        ordering = ["collector"]

    def __str__(self) -> str:
        return self.collector
