"""No door without the audit log: every admin page that writes, every admin action and every management command."""

import importlib

import pytest
from django.contrib import admin
from django.core.management import get_commands
from django.test import RequestFactory

from governance.api.audit import EXEMPT, audited_models
from governance.lib.doors import AuditedCommand
from governance.org.models import User

pytestmark = pytest.mark.django_db


def _superuser_request():
    request = RequestFactory().get("/admin/")
    request.user = User(username="root", is_superuser=True, is_staff=True, is_active=True, role=User.Role.ADMIN)
    return request


def test_it_audits_every_model_an_admin_page_can_add_change_or_delete():
    request, unaudited = _superuser_request(), []
    audited = set(audited_models())
    for model, model_admin in admin.site._registry.items():
        writes = (
            model_admin.has_add_permission(request)
            or model_admin.has_change_permission(request)
            or model_admin.has_delete_permission(request)
        )
        if writes and model not in audited:
            unaudited.append(model._meta.label_lower)

    assert not unaudited, f"admin pages that write a model the audit log does not record: {unaudited}"


# Actions of other packages whose writes are ORM deletes of an audited model: each deletion is an entry already.
DELETE_ACTIONS = {"AccessAttemptAdmin.cleanup_expired_attempts"}


def test_it_audits_every_custom_admin_action():
    request, unaudited = _superuser_request(), []
    audited = set(audited_models())
    for model, model_admin in admin.site._registry.items():
        for name, (func, _, _) in model_admin.get_actions(request).items():
            label = f"{type(model_admin).__name__}.{name}"
            if name == "delete_selected" or label in DELETE_ACTIONS:
                assert model in audited, label
                continue
            if not getattr(func, "audited", False):
                unaudited.append(label)

    assert not unaudited, f"admin actions not wrapped in audited_action: {unaudited}"


def test_every_management_command_of_the_project_enters_the_command_door():
    ours = {name: app for name, app in get_commands().items() if app.startswith("governance.")}
    plain = [
        name
        for name, app in ours.items()
        if not issubclass(importlib.import_module(f"{app}.management.commands.{name}").Command, AuditedCommand)
    ]

    assert len(ours) >= 15
    assert not plain, f"commands that do not derive from AuditedCommand: {plain}"


def test_the_exempt_list_names_only_models_that_exist():
    from django.apps import apps

    known = {m._meta.label_lower for m in apps.get_models()}

    assert set(EXEMPT) <= known, set(EXEMPT) - known
