"""The console fits the key and the screen (issue 45): a key sees only the tabs, forms and links its roles can use
(a writer no Structure drafts or History, a reader no Review, no proposing, no starting a run), and every page
fits a phone's 390 px viewport with content on it. The tests share one server and run in file order."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import PHONE, Mneme, needs_chromium, screenshot

pytestmark = needs_chromium

EVERY_TAB = [
    "Scopes and bundles", "Review", "Structure drafts", "Recall", "Consolidation", "History", "Episodes", "Facts",
]  # fmt: skip
LONG_PATH = "root.pennine-joinery-and-sons-limited.vat-returns-and-flat-rate-scheme"


def tabs(page: Any) -> list[str]:
    return [name.strip() for name in page.locator("nav li:visible a").all_inner_texts()]


def page_width(page: Any) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def open_bundle(page: Any, path: str) -> None:
    page.get_by_label("Path", exact=True).fill(path)
    page.get_by_role("button", name="Show bundle").click()
    page.locator("#bundle article").first.wait_for()


def test_setup_a_tree_with_memories_and_episodes(mneme: Mneme) -> None:
    mneme.ok("POST", "/v1/scopes", {"path": LONG_PATH, "parents": True})
    body = "Pennine Joinery and Sons Limited is on the flat-rate VAT scheme since April; check eligibility yearly."
    mneme.ok("POST", "/v1/memories", {"scope": LONG_PATH, "key": "flat-rate-scheme-eligibility-review", "body": body})
    said = "the quarterly VAT return is due on the 7th."
    conversation = [{"name": "Sam", "content": f"Turn {i}: {said}"} for i in range(3)]
    mneme.ok("POST", "/v1/remember", {"scope": LONG_PATH, "session_id": "call-1", "messages": conversation})


def test_an_admin_sees_every_tab(open_console: Any, mneme: Mneme) -> None:
    page = open_console(mneme.admin)
    assert tabs(page) == EVERY_TAB


def test_a_writer_sees_no_drafts_and_no_history(open_console: Any, mneme: Mneme) -> None:
    # Given a writer's key
    page = open_console(mneme.key("wanda-writer", "writer"))
    # Then the tabs are those a writer's routes allow: no Structure drafts, no History
    assert tabs(page) == ["Scopes and bundles", "Review", "Recall", "Consolidation", "Episodes", "Facts"]
    # And a bundle block offers edit but no history link; proposing and starting a run are there
    open_bundle(page, LONG_PATH)
    block = page.locator('#bundle article[data-key="flat-rate-scheme-eligibility-review"]')
    assert block.get_by_role("button", name="edit").is_visible()
    assert block.get_by_role("link", name="history").count() == 0
    assert page.locator("#memory-form").is_visible()
    screenshot(page, "30-writer-scopes")
    # When the writer follows a link to a page it cannot use, it lands on the scopes page
    page.goto(mneme.url + "/console#drafts")
    page.locator("#page-scopes").wait_for()
    assert page.locator("#page-drafts").is_hidden() and page.locator("#draft-form").is_hidden()
    page.goto(mneme.url + "/console#history")
    page.locator("#page-scopes").wait_for()
    assert page.locator("#page-history").is_hidden()
    page.goto(mneme.url + "/console#runs")
    assert page.locator("#run-form").is_visible()


def test_a_reader_sees_no_review_no_proposing_and_no_starting_a_run(open_console: Any, mneme: Mneme) -> None:
    page = open_console(mneme.key("rory-reader", "reader"))
    assert tabs(page) == ["Scopes and bundles", "Recall", "Consolidation", "Episodes", "Facts"]
    open_bundle(page, LONG_PATH)
    block = page.locator('#bundle article[data-key="flat-rate-scheme-eligibility-review"]')
    assert block.get_by_role("button", name="edit").count() == 0
    assert page.locator("#memory-form").is_hidden()
    screenshot(page, "31-reader-scopes")
    page.goto(mneme.url + "/console#runs")
    page.locator("#page-runs").wait_for()
    assert page.locator("#run-form").is_hidden() and page.get_by_role("button", name="Refresh").is_visible()
    page.goto(mneme.url + "/console#review")
    page.locator("#page-scopes").wait_for()
    assert page.locator("#page-review").is_hidden()


def test_every_page_fits_a_phone_for_each_key(open_console: Any, mneme: Mneme) -> None:
    for principal, role in (("local-admin", "admin"), ("wanda-writer", "writer"), ("rory-reader", "reader")):
        key = mneme.admin if role == "admin" else mneme.keys[principal]
        page = open_console(key, PHONE)
        assert page_width(page) <= PHONE["width"], (role, "signed in")
        open_bundle(page, LONG_PATH)
        assert page_width(page) <= PHONE["width"], (role, "bundle")
        if role == "writer":
            screenshot(page, "32-phone-writer-bundle")
        for tab in tabs(page):
            page.locator("nav").get_by_role("link", name=tab).click()
            page.wait_for_load_state("networkidle")
            assert page_width(page) <= PHONE["width"], (role, tab)
        page.locator("nav").get_by_role("link", name="Recall").click()
        page.locator("#recall-query").fill("when is the quarterly VAT return due?")
        page.locator("#recall-scope").fill(LONG_PATH)
        page.get_by_role("button", name="Recall").click()
        page.locator("#recall-out li").first.wait_for()
        assert page_width(page) <= PHONE["width"], (role, "recall results")
        if role == "reader":
            screenshot(page, "33-phone-reader-recall", focus="#recall-out")


def test_the_page_names_its_icon_and_the_server_answers_for_it(open_console: Any, mneme: Mneme) -> None:
    page = open_console(None)
    icon = page.request.get(mneme.url + "/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert page.locator('link[rel="icon"]').get_attribute("href") == "favicon.ico"
