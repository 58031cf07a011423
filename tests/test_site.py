"""Login, admin, the OpenAPI schema, Swagger UI from local assets, the published record schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

from apps.ingest.contract import json_schema
from apps.ingest.models import Rejection
from tests.factories import record

ROOT = Path(__file__).resolve().parent.parent


def test_login_page_and_login(client, django_user_model):
    django_user_model.objects.create_user("ana", password="a-long-test-password")

    assert client.get("/").status_code == 302
    page = client.get("/login/")
    assert page.status_code == 200 and b"csrfmiddlewaretoken" in page.content
    response = client.post("/login/", {"username": "ana", "password": "a-long-test-password"}, follow=True)
    assert response.status_code == 200
    assert b"Log out ana" in response.content


def test_admin_lists_rejections(admin_client, collector):
    collector.send([record(**{"tokens.prompt": -1})])

    page = admin_client.get("/admin/ingest/rejection/")

    assert page.status_code == 200
    assert Rejection.objects.get().record_id.encode() in page.content


def test_openapi_schema_describes_the_endpoints(client, db):
    schema = client.get("/api/schema/?format=json").json()

    assert {"/api/v1/records", "/api/v1/usage", "/api/v1/rejections"} <= set(schema["paths"])
    assert "inclusive" in schema["paths"]["/api/v1/records"]["post"]["description"]


def test_swagger_ui_uses_only_local_assets(client, db):
    page = client.get("/api/docs/").content.decode()

    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page)
    assert assets and not [a for a in assets if a.startswith(("http:", "https:", "//"))]
    script = next(a for a in assets if a.endswith("swagger-ui-bundle.js"))
    assert client.get(script).status_code == 200


def test_published_record_schema_is_the_one_the_api_enforces():
    published = json.loads((ROOT / "docs" / "record-v1.schema.json").read_text())

    assert published == json_schema()
