"""The console's static files through the local server (the browser tests drive them in Chromium)."""

from __future__ import annotations

from pathlib import Path

import requests

from mneme.http.console import POLICY

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_and_its_files_are_served_without_a_key_under_the_policy(server: str) -> None:
    page = requests.get(f"{server}/console", timeout=30)
    assert page.status_code == 200 and page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert page.headers["Content-Security-Policy"] == POLICY and "default-src 'self'" in POLICY
    assert page.headers["X-Content-Type-Options"] == "nosniff" and page.headers["Cache-Control"] == "no-store"
    assert '<script src="console/console.js" defer></script>' in page.text
    for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css")):
        asset = requests.get(f"{server}/console/{name}", timeout=30)
        assert asset.status_code == 200 and asset.headers["Content-Type"].startswith(kind)
        assert asset.headers["Content-Security-Policy"] == POLICY


def test_only_the_console_files_are_served_and_only_by_get(server: str) -> None:
    for name in ("index.html", "..%2Fhttp%2Fconsole.py", "admin.key", "nope.js"):
        missing = requests.get(f"{server}/console/{name}", timeout=30)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "route_not_found", name
    refused = requests.post(f"{server}/console", json={}, timeout=30)
    assert refused.status_code == 405 and refused.json()["error"]["details"]["allow"] == ["GET", "HEAD"]
    assert requests.get(f"{server}/console?key=x", timeout=30).status_code == 400  # nothing goes in a URL


def test_head_console_answers_the_pages_headers_and_no_body(server: str) -> None:
    # A monitor or a proxy checking the console (issue 45: it was a 405)
    head = requests.head(f"{server}/console", timeout=30)
    get = requests.get(f"{server}/console", timeout=30)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Content-Type"] == "text/html; charset=utf-8"
    assert head.headers["Content-Length"] == str(len(get.content)) and head.headers["Content-Security-Policy"] == POLICY


def test_the_icon_is_served_and_the_page_names_it(server: str) -> None:
    icon = requests.get(f"{server}/favicon.ico", timeout=30)
    assert icon.status_code == 200 and icon.headers["Content-Type"] == "image/svg+xml"
    assert icon.text.startswith("<svg") and icon.headers["X-Content-Type-Options"] == "nosniff"
    assert '<link rel="icon" href="favicon.ico"' in requests.get(f"{server}/console", timeout=30).text


def test_the_api_document_is_served_without_a_key_exactly_as_committed(server: str) -> None:
    document = requests.get(f"{server}/openapi.json", timeout=30)
    assert document.status_code == 200 and document.headers["Content-Type"] == "application/json"
    assert document.content == (ROOT / "docs" / "openapi.json").read_bytes()
    assert document.json()["paths"]["/v1/recall"]["post"]["security"] == [{"apiKey": []}]
