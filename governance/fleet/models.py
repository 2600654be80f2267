from django.db import models
from django.db.models.functions import Now


class Cluster(models.Model):
    """A set of GPU nodes under one scheduler, priced and reconciled as a whole."""

    class UnallocatedPolicy(models.TextChoices):
        SHOW = "show", "Shown as its own line"
        SHARE = "share", "Shared among teams by allocated cost"

    name = models.CharField(max_length=200, unique=True)
    unallocated_policy = models.CharField(
        max_length=8, choices=UnallocatedPolicy.choices, default=UnallocatedPolicy.SHOW
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A host with GPUs, as named by its collector."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=200)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="node_unique_cluster_name")]

    def __str__(self) -> str:
        return self.name


class Gpu(models.Model):
    """One GPU or one MIG instance (a GPU of its own in the records), identified by its UUID."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="gpus")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    uuid = models.CharField(max_length=200)
    index = models.PositiveSmallIntegerField()
    model = models.CharField(max_length=200)
    memory_total_mib = models.FloatField(null=True, blank=True, help_text="Null where no sample has told it.")
    numa_node = models.PositiveSmallIntegerField(null=True, blank=True)
    mig_profile = models.CharField(max_length=32, blank=True)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    created_at = models.DateTimeField(db_default=Now(), help_text="When a batch first named it (server time).")
    introduced_by = models.ForeignKey(
        "api.ApiToken", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
        help_text="The ingest token whose batch first named it (none: an operator's import).",
    )  # fmt: skip
    unconfirmed = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Beyond the cluster's declared capacity: neither capacity nor billed until an admin confirms it.",
    )
    confirmed_at = models.DateTimeField(null=True, blank=True, help_text="When an admin confirmed it.")

    class Meta:
        verbose_name = "GPU"
        verbose_name_plural = "GPUs"
        ordering = ["cluster", "node", "index"]
        constraints = [models.UniqueConstraint(fields=["cluster", "uuid"], name="gpu_unique_cluster_uuid")]
        indexes = [models.Index(fields=["cluster"], condition=models.Q(unconfirmed=True), name="gpu_unconfirmed_idx")]

    def __str__(self) -> str:
        return f"{self.node.name}:{self.index} {self.model}"


class NodeTopology(models.Model):
    """How a node's GPUs are connected, pair by pair, as its collector last reported it (`POST /api/v1/topology/`).

    Links are nvidia-smi's names, nearest first: NV# (NVLink), PIX, PXB (PCIe switches), PHB (the CPU's host
    bridge), NODE (host bridges of one NUMA node), SYS (across sockets). The placement rule reads them.
    """

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="topology")
    gpus = models.PositiveSmallIntegerField(help_text="GPUs on the node, indexes 0 to gpus - 1.")
    links = models.JSONField(help_text="'i-j' (GPU indexes, i < j) to the link between them, for every pair.")
    source = models.CharField(max_length=16, help_text="nvml or nvidia-smi.")
    reported_at = models.DateTimeField()

    class Meta:
        verbose_name = "node topology"
        verbose_name_plural = "node topologies"

    def __str__(self) -> str:
        return f"{self.node} ({self.gpus} GPUs)"
