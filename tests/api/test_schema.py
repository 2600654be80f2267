"""The committed OpenAPI file is what the code generates; the docs page needs no internet."""

from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.yaml"
REFRESH = "python manage.py spectacular --file docs/openapi.yaml --validate"


def test_the_committed_schema_matches_the_code(tmp_path):
    fresh = tmp_path / "openapi.yaml"

    call_command("spectacular", "--file", str(fresh), "--validate", "--fail-on-warn")

    assert fresh.read_text() == COMMITTED.read_text(), f"the API changed: refresh the schema with `{REFRESH}`"


def test_every_operation_documents_the_error_shape():
    text = COMMITTED.read_text()

    assert "Error:" in text and "'401':" in text and "'403':" in text
    assert "apiToken:" in text


@pytest.mark.django_db
def test_the_docs_page_loads_swagger_ui_from_our_own_static_files(client):
    response = client.get("/api/docs/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower() and "https://" not in html
    asset = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert asset.status_code == 200


@pytest.mark.django_db
def test_the_schema_endpoint_serves_openapi_3(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")

    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/jobs/{id}/usage/" in schema["paths"]
