"""The console's Episodes and Facts pages in a real headless Chromium against `mneme serve`: browse by scope,
session and metadata, search, open an episode with the facts drawn from it and a fact with its sources and
corrections, forget each after a confirmation, correct a fact; a reader sees no forget; stored HTML stays text.

The tests share one server and run in file order: each builds on the state the previous ones left.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.conftest import Mneme, needs_chromium, screenshot

pytestmark = needs_chromium
HOSTILE = '<img src="x" onerror="window.__pwned = 1">Maya said <b>teal</b>'


@pytest.fixture(scope="module", autouse=True)
def settled_at_once() -> Iterator[None]:
    """The server consolidates episodes as soon as they are written (no settle window)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MNEME_CONSOLIDATION__SETTLE_SECONDS", "0")
        yield


def consolidate(mneme: Mneme) -> None:
    run = mneme.ok("POST", "/v1/consolidate", {})
    for _ in range(600):
        if mneme.ok("GET", f"/v1/consolidations/{run['run_id']}")["status"] != "running":
            return
        time.sleep(0.05)
    raise AssertionError("the run did not finish")


def show(page: Any, kind: str, **filters: str) -> None:
    page.goto(page.url.split("#")[0] + f"#{kind}")
    for label, value in filters.items():
        page.locator(f"#{kind}-{label}").fill(value)
    page.evaluate(f"document.getElementById('{kind}').replaceChildren()")  # wait below for the new answer only
    page.get_by_role("button", name=f"Show {kind}").click()


def test_browse_episodes_by_metadata_and_session_and_search_them(open_console: Any, mneme: Mneme) -> None:
    # Given a conversation about Maya's colour (and one turn by Bob), consolidated
    for n, text in enumerate(["Maya's favourite colour is teal.", "Maya's favourite colour is teal, she said again.",
                              HOSTILE]):  # fmt: skip
        mneme.ok("POST", "/v1/remember", {"scope": "root.chat", "create_scope": True, "content": text,
                                          "session_id": "call-1", "metadata": {"user": "maya", "turn": n}})  # fmt: skip
    mneme.ok(
        "POST", "/v1/remember", {"scope": "root.chat", "content": "Bob prefers orange.", "metadata": {"user": "bob"}}
    )
    consolidate(mneme)
    page = open_console(mneme.admin)
    # When the admin lists the episodes holding user=maya
    show(page, "episodes", metadata="user=maya")
    items = page.locator("#episodes li")
    items.nth(2).wait_for()
    # Then Maya's three turns show, newest first, Bob's does not; the hostile one is text
    assert items.count() == 3
    assert "Bob prefers orange" not in page.locator("#episodes").inner_text()
    assert HOSTILE in items.first.inner_text()
    assert page.evaluate("window.__pwned") is None
    # And by session, and by search (ranked by recall)
    show(page, "episodes", metadata="", session="call-1")
    page.locator("#episodes li").nth(2).wait_for()
    assert page.locator("#episodes li").count() == 3
    show(page, "episodes", session="", query="orange")
    page.locator("#episodes li").first.wait_for()
    assert "Bob prefers orange" in page.locator("#episodes li").first.inner_text()
    screenshot(page, "20-episodes")


def test_open_an_episode_and_forget_it_after_confirming(open_console: Any, mneme: Mneme) -> None:
    [first] = [e for e in mneme.ok("GET", "/v1/episodes?metadata.turn=0")["episodes"]]
    page = open_console(mneme.admin)
    show(page, "episodes", metadata="turn=0")
    page.locator(f'[data-open="{first["id"]}"]').click()
    # The episode opens with the facts drawn from it
    article = page.locator("#episode article")
    article.filter(has_text="Facts drawn from it").wait_for()
    assert "Maya's favourite colour is teal." in article.inner_text()
    assert article.locator("li").count() >= 1
    screenshot(page, "21-episode", "#episode")
    # Forget asks first: nothing is sent until "Forget for good"
    page.get_by_role("button", name="Forget this episode…").click()
    page.get_by_label("Reason (kept with who forgot it and when)").fill("Maya asked")
    assert mneme.call("GET", f"/v1/episodes/{first['id']}")[0] == 200
    page.get_by_role("button", name="Forget for good").click()
    page.locator("#episode").filter(has_text=f"Forgot episode {first['id']}").wait_for()
    status, answer = mneme.call("GET", f"/v1/episodes/{first['id']}")
    assert status == 404 and answer["error"]["details"]["reason"] == "Maya asked"
    screenshot(page, "22-episode-forgotten", "#episode")


def test_a_fact_with_its_sources_corrected_then_forgotten(open_console: Any, mneme: Mneme) -> None:
    facts = mneme.ok("GET", "/v1/facts?scope=root.chat")["facts"]
    [fact] = [f for f in facts if f["tier"] == "raw" and f["entity"] == "Maya"]  # ("Bob prefers orange." too)
    page = open_console(mneme.admin)
    show(page, "facts", metadata="user=maya")
    page.locator(f'[data-open="{fact["id"]}"]').click()
    article = page.locator("#fact article")
    article.filter(has_text="Sources").wait_for()
    # its first source was forgotten: it rests on the other two, and its history says so
    assert fact["version"] == 2
    assert "regrounded: source episode" in article.inner_text()
    # An approver corrects the value: a new version, the correction kept in its history
    page.locator("#correct-value").fill("petrol blue")
    page.locator("#correct-reason").fill("she changed her mind")
    page.get_by_role("button", name=f"Save as version {fact['version'] + 1}").click()
    page.locator("#fact article").filter(has_text="she changed her mind").wait_for()
    assert f"version\n{fact['version'] + 1}" in article.inner_text() and "petrol blue" in article.inner_text()
    screenshot(page, "23-fact", "#fact")
    # Then forgets it after confirming
    page.get_by_role("button", name="Forget this fact…").click()
    page.get_by_role("button", name="Forget for good").click()
    page.locator("#fact").filter(has_text=f"Forgot fact {fact['id']}").wait_for()
    assert mneme.call("GET", f"/v1/facts/{fact['id']}")[0] == 404


def test_a_reader_browses_but_cannot_forget(open_console: Any, mneme: Mneme) -> None:
    reader = mneme.key("rita-reader", "reader")
    [episode] = mneme.ok("GET", "/v1/episodes?metadata.user=bob")["episodes"]
    page = open_console(reader)
    show(page, "episodes", metadata="user=bob")
    page.locator(f'[data-open="{episode["id"]}"]').click()
    page.locator("#episode article").filter(has_text="Bob prefers orange").wait_for()
    assert page.get_by_role("button", name="Forget this episode…").count() == 0
    # signing out clears what the pages showed
    page.get_by_role("button", name="Sign out").click()
    assert page.locator("#episode").inner_text() == "" and page.locator("#episodes").inner_text() == ""
