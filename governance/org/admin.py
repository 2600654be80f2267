from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from governance.org.models import Membership, OidcIdentity, Project, ProjectMapping, Team, User
from governance.org.services import jobs_remap_on_commit


@admin.register(User)
class GovernanceUserAdmin(UserAdmin):
    fieldsets = (*(UserAdmin.fieldsets or ()), ("Governance", {"fields": ("role",)}))
    list_display = ("username", "email", "role", "is_active")
    list_filter = ("role", "is_active")


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "lead_email")
    search_fields = ("slug", "name")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]


class ProjectMappingInline(admin.TabularInline):
    model = ProjectMapping
    extra = 0


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "team")
    list_filter = ("team",)
    search_fields = ("slug", "name")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [ProjectMappingInline]

    def save_formset(self, request, form, formset, change) -> None:
        """Jobs naming an account whose mapping was added, changed or deleted are remapped after the save."""
        accounts = set()
        if formset.model is ProjectMapping:
            for inline in formset.forms:
                if inline.has_changed() or inline in formset.deleted_forms:
                    accounts |= {inline.initial.get("value"), inline.cleaned_data.get("value")} - {None, ""}
        super().save_formset(request, form, formset, change)
        if accounts:
            jobs_remap_on_commit(accounts=accounts)


@admin.register(ProjectMapping)
class ProjectMappingAdmin(admin.ModelAdmin):
    """A mapping added, changed or deleted here remaps the jobs naming its account (open months re-priced; a
    closed month's moves land as corrections), as the inline under a project and the API do."""

    list_display = ("kind", "value", "cluster_name", "project")
    list_filter = ("kind", "project__team")
    search_fields = ("value", "project__slug")

    def save_model(self, request, obj, form, change) -> None:
        before = form.initial.get("value") if change else None
        super().save_model(request, obj, form, change)
        jobs_remap_on_commit(accounts={obj.value, before} - {None, ""})

    def delete_model(self, request, obj) -> None:
        value = obj.value
        super().delete_model(request, obj)
        jobs_remap_on_commit(accounts=[value])


@admin.register(OidcIdentity)
class OidcIdentityAdmin(admin.ModelAdmin):
    """Adding one links a provider's person (issuer, subject) to an existing local account: the only way a
    sign-in through the provider reaches an account it did not make."""

    list_display = ("user", "issuer", "subject", "linked", "linked_by", "created_at")
    search_fields = ("user__username", "subject", "issuer")
    autocomplete_fields = ["user"]
    readonly_fields = ("linked", "linked_by", "created_at")

    def save_model(self, request, obj, form, change) -> None:
        if not change:
            obj.linked, obj.linked_by = True, request.user
        super().save_model(request, obj, form, change)
