from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models.functions import Lower

TEAM_NAME_TAKEN = "A team with this name already exists (names are compared ignoring case)."


class User(AbstractUser):
    """A person who signs in. `role` grants organisation-wide powers; team powers come from memberships."""

    class Role(models.TextChoices):
        ADMIN = "admin", "Platform admin"
        FINANCE = "finance", "Finance"
        MEMBER = "member", "Team member"

    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)

    @property
    def is_platform_admin(self) -> bool:
        return self.is_superuser or self.role == self.Role.ADMIN

    @property
    def sees_all_costs(self) -> bool:
        return self.is_platform_admin or self.role == self.Role.FINANCE


class Team(models.Model):
    """A group that is billed: the unit of chargeback and of visibility."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    lead_email = models.EmailField(blank=True, help_text="Where budget alerts go when no lead membership has one.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        # Totals and statements name teams: two teams called "vision" could not be told apart there.
        constraints = [
            models.UniqueConstraint(Lower("name"), name="team_unique_name", violation_error_message=TEAM_NAME_TAKEN)
        ]

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    """A piece of work owned by one team; jobs are attributed to projects."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="projects")
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name


class ProjectMapping(models.Model):
    """Maps a scheduler's account (Slurm) or namespace (Kubernetes) to a project, optionally per cluster."""

    class Kind(models.TextChoices):
        SLURM_ACCOUNT = "slurm_account", "Slurm account"
        K8S_NAMESPACE = "k8s_namespace", "Kubernetes namespace"
        LABEL = "label", "Project label"

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.SLURM_ACCOUNT)
    value = models.CharField(max_length=200)
    cluster_name = models.CharField(max_length=200, blank=True, help_text="Empty: applies to every cluster.")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="mappings")

    class Meta:
        ordering = ["kind", "value"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "value", "cluster_name"], name="project_mapping_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.value} -> {self.project}"


class Membership(models.Model):
    """A user's place in a team: its lead (sees the team's bill) or an engineer (own jobs, team totals)."""

    class Role(models.TextChoices):
        LEAD = "lead", "Team lead"
        ENGINEER = "engineer", "Engineer"

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ENGINEER)

    class Meta:
        ordering = ["team", "user"]
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="membership_unique_user_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class OidcIdentity(models.Model):
    """A person at an OpenID Connect provider (issuer and subject, never a name) and the local user they are.

    Made at their first sign-in, with a new local user; or by an admin who links an existing local account
    (the admin, or `manage.py link_oidc_identity`). A matching username never links anything.
    """

    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="oidc_identities")
    linked = models.BooleanField(
        default=False, help_text="An admin linked an existing local account (else: made at the first sign-in)."
    )
    linked_by = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", help_text="The admin who linked it."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "OIDC identity"
        verbose_name_plural = "OIDC identities"
        ordering = ["issuer", "subject"]
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_unique_issuer_subject")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer} -> {self.user}"
