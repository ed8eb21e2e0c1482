"""An OpenAPI document as the gate reads it: operations by path template, effects, the dry-run
parameter with its value, the fields links name, and a record-mode answer in the schema's shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reviewer.agent.shaped import shaped_answer
from reviewer.run.calls import UndeclaredOperation, describe
from reviewer.run.errors import RunRefused
from reviewer.run.openapi import ApiDocument
from reviewer.sample_api.app import create_app


@pytest.fixture
def sample_document(tmp_path: Path) -> ApiDocument:
    path = tmp_path / "api.json"
    path.write_text(json.dumps(create_app().openapi()))
    return ApiDocument.load(str(path))


def test_the_sample_api_is_named_by_its_operation_ids(sample_document: ApiDocument) -> None:
    update = describe("PATCH", "/v1/tickets/t1", {"dryRun": "All"}, {"status": "closed"}, sample_document)
    assert (update.tool, update.effect) == ("update_ticket", "update")
    assert update.args == {"ticket_id": "t1", "status": "closed"}
    assert update.request.query is None, "the child's dry-run parameter is the runner's, dropped"
    create = describe("POST", "/v1/tickets", {}, {"title": "x"}, sample_document)
    assert (create.tool, create.produces) == ("create_ticket", ("id",))
    assert describe("GET", "/v1/tickets/t1", {}, None, sample_document).is_read
    assert sample_document.dry_run_query() == {"dryRun": "All"}


def test_an_operation_the_document_lacks_is_undeclared(sample_document: ApiDocument) -> None:
    with pytest.raises(UndeclaredOperation, match="not an operation"):
        describe("PUT", "/v1/tickets/t1", {}, {}, sample_document)
    with pytest.raises(UndeclaredOperation):
        describe("GET", "/v1/tickets/t1/comments", {}, None, sample_document)


def document(tmp_path: Path, paths: dict[str, Any], **extra: Any) -> ApiDocument:
    path = tmp_path / "api.json"
    path.write_text(json.dumps({"openapi": "3.1.0", "paths": paths, **extra}))
    return ApiDocument.load(str(path))


def test_effects_links_refs_and_a_boolean_dry_run_parameter(tmp_path: Path) -> None:
    parsed = document(
        tmp_path,
        {
            "/orders/search": {"post": {"operationId": "search", "x-reviewer-effect": "read"}},
            "/orders/{order}": {"post": {"operationId": "cancel", "x-reviewer-effect": "delete"}},
            "/orders": {
                "post": {
                    "operationId": "place",
                    "parameters": [{"$ref": "#/components/parameters/validate"}],
                    "responses": {
                        "201": {
                            "links": {"owner": {"parameters": {"user": "$response.body#/owner/id"}}},
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/Order"}}
                            },
                        }
                    },
                }
            },
        },
        components={
            "parameters": {
                "validate": {"name": "validate_only", "in": "query", "schema": {"type": "boolean"}}
            },
            "schemas": {"Order": {"properties": {"number": {"type": "string"}, "total": {"type": "number"}}}},
        },
    )
    assert describe("POST", "/orders/search", {}, {"q": 1}, parsed).is_read
    cancel = describe("POST", "/orders/o-1", {}, None, parsed)
    assert (cancel.tool, cancel.effect, cancel.args) == ("cancel", "delete", {"order": "o-1"})
    place = describe("POST", "/orders", {}, {"item": "pen"}, parsed)
    assert place.produces == ("owner.id",)
    assert parsed.dry_run_query() == {"validate_only": "true"}
    assert place.operation is not None
    assert shaped_answer(place.operation.response_schema, {"total": 3}, 1) == {
        "number": "<number from call 1>",
        "total": 3,
    }


def test_a_document_without_paths_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "api.json"
    path.write_text('{"openapi": "3.1.0"}')
    with pytest.raises(RunRefused, match="no paths"):
        ApiDocument.load(str(path))
    path.write_text("not json")
    with pytest.raises(RunRefused, match="cannot read it as JSON"):
        ApiDocument.load(str(path))
