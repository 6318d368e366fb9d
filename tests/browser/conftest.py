"""Browser tests: `mneme serve` (a subprocess on a loopback port, temp data dir) driven by Debian's Chromium
through Playwright. One server and one browser per module; screenshots (1280×800) go to the artefact folder
(`MNEME_ARTIFACTS`, default `.artifacts/console/`, gitignored)."""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import mneme_serve

CHROMIUM = Path(os.environ.get("MNEME_CHROMIUM", "/usr/bin/chromium"))
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("MNEME_ARTIFACTS", ROOT / ".artifacts" / "console"))
VIEWPORT = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}  # a phone held upright (CSS pixels)

NO_CHROMIUM = f"{CHROMIUM} is absent: install Debian's chromium (apt-get install -y chromium; .ci/run does it as root)"
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)


@dataclass
class Mneme:
    """The running server, its admin key, and API calls for setting up what a test needs."""

    url: str
    admin: str
    log: Path
    keys: dict[str, str] = field(default_factory=dict)

    def call(self, method: str, path: str, body: Any = None, key: str | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {key or self.admin}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def ok(self, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
        status, answer = self.call(method, path, body, key)
        assert status < 300, (method, path, status, answer)
        return answer

    def key(self, principal: str, role: str) -> str:
        if principal not in self.keys:
            self.keys[principal] = self.ok("POST", "/v1/keys", {"principal": principal, "roles": [role]})["api_key"]
        return self.keys[principal]


@pytest.fixture(scope="module")
def mneme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mneme]:
    home = tmp_path_factory.mktemp("mneme-home")
    path = os.pathsep.join([str(ROOT / "shared"), str(ROOT)])
    # The access log is on, so the test can show that no key ever reaches the server's output.
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MNEME_HOME": str(home), "PYTHONPATH": path, "MNEME_ACCESS_LOG": "1"}
    log = home.parent / f"{home.name}-serve.log"
    command = [sys.executable, "-m", "mneme.cli", "serve", "--port", "0", "--workers", "1"]
    with mneme_serve(command, home, env, log) as url:
        yield Mneme(url, (home / "admin.key").read_text().strip(), log)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def open_console(browser: Any, mneme: Mneme) -> Iterator[Any]:
    """A fresh browser context (its own sessionStorage) signed in with the given key; console errors fail."""
    contexts: list[Any] = []
    problems: list[str] = []

    def sign_in(key: str | None, viewport: dict[str, int] = VIEWPORT) -> Any:
        phone = viewport["width"] < 600
        context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone)
        context.set_default_timeout(10_000)
        contexts.append(context)
        page = context.new_page()
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(mneme.url + "/console")
        if key is not None:
            page.get_by_label("API key").fill(key)
            page.get_by_role("button", name="Sign in").click()
            page.locator("#who").filter(has_text="tenant").wait_for()
        return page

    yield sign_in
    for context in contexts:
        context.close()
    expected = [p for p in problems if "status of 40" not in p]  # refused calls a test makes on purpose
    assert not expected, expected


def screenshot(page: Any, name: str, focus: str | None = None) -> Path:
    """The viewport (1280×800, or the phone's): from the top of the page, or scrolled to `focus` (a selector)."""
    if focus:
        page.locator(focus).first.scroll_into_view_if_needed()
    else:
        page.evaluate("window.scrollTo(0, 0)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path
