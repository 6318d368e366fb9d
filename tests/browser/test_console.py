"""The console in a real headless Chromium against `mneme serve`: sign-in, the review lifecycle as writer,
reader and approver, stored HTML shown as text, recall's explain trace, a move draft and its alias.

The tests share one server and run in file order: each builds on the state the previous ones left.
"""

from __future__ import annotations

import urllib.request
from typing import Any

from tests.browser.conftest import Mneme, needs_chromium, screenshot

pytestmark = needs_chromium

BODY = "Pennine Joinery moved to the flat-rate VAT scheme in April."
HOSTILE = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2"><b>bold</b> & done'


def bundle_block(page: Any, key: str) -> Any:
    return page.locator(f'#bundle article[data-key="{key}"]')


def open_bundle(page: Any, path: str) -> None:
    page.goto(page.url.split("#")[0] + "#scopes")
    page.get_by_label("Path", exact=True).fill(path)
    page.get_by_role("button", name="Show bundle").click()
    page.locator("#bundle-canonical").filter(has_text=path.split(".")[-1]).wait_for()


def test_the_console_is_served_under_a_strict_content_security_policy(mneme: Mneme) -> None:
    # When the page and its two files are fetched without any key
    with urllib.request.urlopen(mneme.url + "/console", timeout=30) as response:
        html, headers = response.read().decode(), response.headers
    # Then every script and style comes from the server itself: no inline code, no CDN, no key needed
    assert headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert "unsafe-inline" not in headers["Content-Security-Policy"]
    assert "<script>" not in html and "style=" not in html and "http" not in html.split("<body>")[0]
    for name in ("console.js", "console.css"):
        with urllib.request.urlopen(f"{mneme.url}/console/{name}", timeout=30) as asset:
            assert asset.status == 200 and asset.headers["X-Content-Type-Options"] == "nosniff"
    with urllib.request.urlopen(mneme.url + "/console/console.js", timeout=30) as script:
        assert "innerHTML" not in script.read().decode().replace("never innerHTML", "")


def test_sign_in_keeps_the_key_in_session_storage_only(open_console: Any, mneme: Mneme) -> None:
    # Given a wrong key, then the admin's
    page = open_console(None)
    page.get_by_label("API key").fill("mk_not-a-real-key")
    page.get_by_role("button", name="Sign in").click()
    page.locator("#signin-error").filter(has_text="401").wait_for()
    page.get_by_label("API key").fill(mneme.admin)
    page.get_by_role("button", name="Sign in").click()
    # Then the console names the caller; the key is in sessionStorage, never in the URL or a cookie
    page.locator("#who").filter(has_text="local-admin").wait_for()
    assert mneme.admin not in page.url
    assert page.evaluate("document.cookie") == ""
    assert page.evaluate("sessionStorage.getItem('mneme.console.key')") == mneme.admin
    assert page.evaluate("localStorage.length") == 0
    # And a reload of the tab stays signed in; signing out forgets the key
    page.reload()
    page.locator("#who").filter(has_text="local-admin").wait_for()
    page.get_by_role("button", name="Sign out").click()
    assert page.evaluate("sessionStorage.getItem('mneme.console.key')") is None
    screenshot(page, "00-sign-in")


def test_a_writers_memory_is_pending_in_its_bundle_and_absent_from_a_readers(open_console: Any, mneme: Mneme) -> None:
    # Given a tree with layers and a few published memories
    mneme.ok("PUT", "/v1/layers", {"layers": {"1": "clients", "2": "services"}})
    mneme.ok("POST", "/v1/scopes", {"path": "root.pennine-joinery.vat", "parents": True})
    mneme.ok("POST", "/v1/scopes", {"path": "root.beta-bakery", "parents": True})
    mneme.ok("POST", "/v1/memories", {"scope": "root", "key": "house-style", "body": "Write in plain British English."})
    mneme.ok("POST", "/v1/memories", {"tag": "services=vat", "key": "flat-rate-rule", "body": "Check eligibility."})
    writer = mneme.key("wendy-writer", "writer")
    # When the writer proposes a memory from the console
    page = open_console(writer)
    open_bundle(page, "root.pennine-joinery.vat")
    page.get_by_label("Key", exact=True).fill("vat-scheme")
    page.get_by_label("Body", exact=True).fill(BODY)
    page.get_by_role("button", name="Propose").click()
    # Then it shows in the writer's bundle, marked pending, with its header fields
    block = bundle_block(page, "vat-scheme")
    block.wait_for()
    assert "pending" in block.get_attribute("class")
    assert block.locator(".badge.warn").inner_text() == "pending"
    assert block.locator(".priority").inner_text() == "priority 9"
    assert block.locator("pre").inner_text() == BODY
    assert bundle_block(page, "flat-rate-rule").locator(".priority").inner_text() == "priority 8"
    screenshot(page, "01-scopes-and-bundle-writer-pending")
    # And another reader's bundle of the same path does not hold it
    reader = open_console(mneme.key("rita-reader", "reader"))
    open_bundle(reader, "root.pennine-joinery.vat")
    bundle_block(reader, "house-style").wait_for()
    assert bundle_block(reader, "vat-scheme").count() == 0


def test_a_reader_sees_no_approve_button_and_the_server_refuses_one_anyway(open_console: Any, mneme: Mneme) -> None:
    page = open_console(mneme.key("rita-reader", "reader"))
    page.goto(mneme.url + "/console#review")
    page.locator("#page-scopes").wait_for()  # a reader has no Review tab: the link lands on the scopes
    assert page.get_by_role("button", name="Approve").count() == 0
    assert page.locator("#page-review").is_hidden() and page.locator("#queue-title").is_hidden()
    # When the reader's page calls the approve route itself
    (pending,) = mneme.ok("GET", "/v1/reviews")["queue"]
    status = page.evaluate(
        """async (id) => (await fetch(`/v1/memories/${id}/approve`, {method: "POST",
             headers: {Authorization: `Bearer ${sessionStorage.getItem("mneme.console.key")}`}})).status""",
        pending["memory_id"],
    )
    # Then the server refuses it: the button's absence is a courtesy, the role check is the rule
    assert status == 403
    assert mneme.ok("GET", "/v1/reviews")["queue"][0]["memory_id"] == pending["memory_id"]


def test_an_approver_approves_with_a_reason_and_the_memory_is_published(open_console: Any, mneme: Mneme) -> None:
    # Given the approver's review queue
    page = open_console(mneme.key("ada-approver", "approver"))
    page.goto(mneme.url + "/console#review")
    item = page.locator('#queue article[data-key="vat-scheme"]')
    item.wait_for()
    assert "by wendy-writer" in item.inner_text() and "not yet published" in item.inner_text()
    assert item.locator("td.after").inner_text().strip() == BODY
    screenshot(page, "02-review-queue")
    # When it approves with a reason
    item.get_by_label("Reason").fill("Confirmed against the HMRC letter.")
    item.get_by_role("button", name="Approve").click()
    page.locator("#status").filter(has_text="Approved vat-scheme").wait_for()
    assert page.locator('#queue article[data-key="vat-scheme"]').count() == 0
    # Then every reader's bundle holds it, published
    reader = open_console(mneme.key("rita-reader", "reader"))
    open_bundle(reader, "root.pennine-joinery.vat")
    block = bundle_block(reader, "vat-scheme")
    block.wait_for()
    assert "pending" not in block.get_attribute("class")
    assert block.locator(".badge.warn").count() == 0
    screenshot(reader, "03-bundle-published")


def test_stored_html_is_shown_as_text(open_console: Any, mneme: Mneme) -> None:
    # Given a memory whose body is hostile HTML (memories come from agents: treat them as attacker-controlled)
    mneme.ok("POST", "/v1/memories", {"scope": "root.beta-bakery", "key": "hostile", "body": HOSTILE})
    page = open_console(mneme.key("rita-reader", "reader"))
    open_bundle(page, "root.beta-bakery")
    block = bundle_block(page, "hostile")
    block.wait_for()
    # Then it shows as the literal text: no element was made of it and nothing of it ran
    assert block.locator("pre").inner_text() == HOSTILE
    assert block.locator("pre script, pre img, pre b").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#bundle-markdown").text_content().count("<b>bold</b>") == 1


def test_recall_draws_the_explain_stages_and_the_context_pack(open_console: Any, mneme: Mneme) -> None:
    # Given episodes to recall
    for text in (
        "Sam confirmed Pennine Joinery is on the flat-rate VAT scheme.",
        "Beta Bakery files VAT quarterly.",
        "The office cat is called Biscuit.",
    ):
        mneme.ok("POST", "/v1/remember", {"scope": "root.pennine-joinery", "content": text})
    page = open_console(mneme.key("rita-reader", "reader"))
    page.goto(mneme.url + "/console#recall")
    # When a query runs with the scoring knobs
    page.get_by_label("Query").fill("which VAT scheme is Pennine Joinery on?")
    page.get_by_label("Strictness").select_option("precision")
    page.get_by_role("button", name="Recall").click()
    # Then the results carry per-channel bars, and every stage of the pipeline is drawn with its counts
    stages = page.locator("#stages tbody tr")
    stages.first.wait_for()
    names = [row.get_attribute("data-stage") for row in stages.all()]
    assert names[:3] == ["search", "fuse", "admit"] and "pack" in names
    assert page.locator(".results li").count() >= 1
    assert page.locator(".results li").first.locator("meter").count() >= 2
    assert "flat-rate" in page.locator("#context-pack").inner_text()
    assert page.locator("#retrieval-path").inner_text() in {"hybrid", "vector", "lexical", "lexical_fallback"}
    screenshot(page, "04-recall-explain", focus="#stages")


def test_a_published_move_draft_leaves_an_alias_that_resolves(open_console: Any, mneme: Mneme) -> None:
    page = open_console(mneme.key("ada-approver", "approver"))
    page.goto(mneme.url + "/console#drafts")
    # When the approver drafts a move and reads the preview
    page.get_by_label("Change", exact=True).select_option("move")
    page.get_by_label("Scope to change").fill("root.pennine-joinery.vat")
    page.get_by_label("New parent / merge into / move records into").fill("root.beta-bakery")
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#draft article")
    preview.wait_for()
    assert "root.beta-bakery.vat" in preview.inner_text()
    assert "Aliases (old paths that keep resolving) (1)" in preview.inner_text()
    screenshot(page, "05-structure-draft-preview", focus="#draft article h4")
    page.get_by_role("button", name="Publish").click()
    page.locator("#draft-status").filter(has_text="published").wait_for()
    # Then the old path resolves to the new one, and the bundle's headers carry the canonical path
    open_bundle(page, "root.pennine-joinery.vat")
    canonical = page.locator("#bundle-canonical")
    canonical.filter(has_text="is an alias").wait_for()
    assert "resolves to root.beta-bakery.vat" in canonical.inner_text()
    assert bundle_block(page, "vat-scheme").locator(".target").inner_text() == "root.beta-bakery.vat"
    screenshot(page, "06-alias-resolves")


def test_the_scope_tree_shows_the_alias_and_a_draft_can_be_discarded(open_console: Any, mneme: Mneme) -> None:
    page = open_console(mneme.key("ada-approver", "approver"))
    # The tree lists the moved scope with the old path that still resolves to it
    tree = page.locator("#tree")
    tree.locator('[data-path="root.beta-bakery.vat"]').wait_for()
    assert tree.locator(".alias").filter(has_text="root.pennine-joinery.vat").count() == 1
    screenshot(page, "07-scope-tree-with-alias")
    # A draft that is previewed and then discarded changes nothing
    page.goto(mneme.url + "/console#drafts")
    page.get_by_label("Change", exact=True).select_option("merge")
    page.get_by_label("Scope to change").fill("root.beta-bakery")
    page.get_by_label("New parent / merge into / move records into").fill("root.pennine-joinery")
    page.get_by_role("button", name="Preview").click()
    page.locator("#draft-status").filter(has_text="open").wait_for()
    page.get_by_role("button", name="Discard").click()
    page.locator("#draft-status").filter(has_text="discarded").wait_for()
    assert page.get_by_role("button", name="Publish").count() == 0
    assert any(s["path"] == "root.beta-bakery" for s in mneme.ok("GET", "/v1/scopes")["scopes"])


def test_the_writer_reads_the_decision_and_its_reason(open_console: Any, mneme: Mneme) -> None:
    page = open_console(mneme.key("wendy-writer", "writer"))
    page.goto(mneme.url + "/console#review")
    row = page.locator("#mine tr[data-memory-id]").filter(has_text="vat-scheme")
    row.wait_for()
    assert "approved" in row.inner_text() and "Confirmed against the HMRC letter." in row.inner_text()
    assert "ada-approver" in row.inner_text()
    assert page.get_by_role("button", name="Approve").count() == 0  # a writer reviews nothing
    screenshot(page, "08-review-my-proposals")


def test_consolidation_runs_are_listed_and_one_can_be_started(open_console: Any, mneme: Mneme) -> None:
    page = open_console(mneme.key("wendy-writer", "writer"))
    claim = {"scope": "root.acme-tiles", "content": "Acme Tiles's VAT scheme is cash accounting.", "create_scope": True}
    mneme.ok("POST", "/v1/remember", claim)
    page.goto(mneme.url + "/console#runs")
    page.locator("#runs").filter(has_text="No runs yet.").wait_for()
    page.get_by_role("button", name="Start a run").click()
    page.locator("#status").filter(has_text="started").wait_for()
    run = page.locator("#runs article.run").first
    run.wait_for()
    run_id = run.get_attribute("data-run-id")
    # The run finishes in the background: refresh until its counters show
    for _ in range(100):
        if mneme.ok("GET", f"/v1/consolidations/{run_id}")["status"] != "running":
            break
        page.wait_for_timeout(100)
    page.get_by_role("button", name="Refresh").click()
    page.locator(f'#runs article[data-run-id="{run_id}"] tbody tr').first.wait_for()
    assert page.locator(f'#runs article[data-run-id="{run_id}"] .badge').inner_text() in {"succeeded", "partial"}
    assert "collect" in page.locator(f'#runs article[data-run-id="{run_id}"]').inner_text()
    facts = page.locator(f'#runs article[data-run-id="{run_id}"] .run-facts')  # the facts the run wrote
    assert "Acme Tiles's VAT scheme is cash accounting." in facts.inner_text()
    screenshot(page, "09-consolidation-runs")


def test_a_memorys_history_shows_who_changed_what_and_why(open_console: Any, mneme: Mneme) -> None:
    page = open_console(mneme.key("ada-approver", "approver"))
    open_bundle(page, "root.beta-bakery.vat")
    block = bundle_block(page, "vat-scheme")
    block.get_by_role("link", name="history").click()
    page.get_by_role("button", name="Show history").click()
    rows = page.locator("#history tbody tr")
    rows.nth(1).wait_for()
    assert rows.nth(0).locator("td").nth(2).inner_text() == "created"
    assert rows.nth(0).locator("td").nth(3).inner_text() == "wendy-writer"
    approved = rows.nth(1).inner_text()
    assert "approved" in approved and "ada-approver" in approved and "Confirmed against the HMRC letter." in approved
    screenshot(page, "10-memory-history")


def test_a_writers_edit_is_a_revision_reviewed_with_its_diff_and_stale_flag(open_console: Any, mneme: Mneme) -> None:
    # Given a writer who edits a published memory from its bundle block
    writer = open_console(mneme.key("wendy-writer", "writer"))
    open_bundle(writer, "root.beta-bakery.vat")
    block = bundle_block(writer, "vat-scheme")
    block.get_by_role("button", name="edit").click()
    block.get_by_label("New body for vat-scheme").fill("Pennine Joinery left the flat-rate scheme in 2027.")
    block.get_by_role("button", name="Save edit").click()
    writer.locator("#status").filter(has_text="pending review").wait_for()
    # And an admin who publishes another edit meanwhile, so the revision was made on an older version
    (memory,) = [b for b in mneme.ok("POST", "/v1/retrieve", {"path": "root.beta-bakery.vat"})["blocks"]
                 if b["key"] == "vat-scheme"]  # fmt: skip
    mneme.ok("PATCH", f"/v1/memories/{memory['memory_id']}", {"body": BODY + " (checked)"})
    # When the approver reads the queue
    page = open_console(mneme.key("ada-approver", "approver"))
    page.goto(mneme.url + "/console#review")
    item = page.locator('#queue article[data-key="vat-scheme"]')
    item.wait_for()
    # Then the revision shows its author, the published body against the proposed one, and that it is stale
    assert "revision" in item.inner_text() and "by wendy-writer" in item.inner_text()
    assert item.locator("td.before").inner_text().strip() == BODY + " (checked)"
    assert item.locator("td.after").inner_text().strip() == "Pennine Joinery left the flat-rate scheme in 2027."
    assert "stale" in item.locator(".badge.warn").inner_text()
    screenshot(page, "11-review-stale-revision")
    # And approving it is refused by the server (409 stale_revision), shown to the approver; rejecting works
    item.get_by_role("button", name="Approve").click()
    page.locator("#status").filter(has_text="stale_revision").wait_for()
    item.get_by_label("Reason").fill("Made on an old version: edit again.")
    item.get_by_role("button", name="Reject").click()
    page.locator("#status").filter(has_text="Rejected vat-scheme").wait_for()


def test_no_key_reaches_the_server_log(mneme: Mneme) -> None:
    # After every test above, with the access log on: requests were logged, and no key appears in them
    output = mneme.log.read_text()
    assert "GET /console/console.js" in output and "POST /v1/retrieve" in output
    for secret in [mneme.admin, *mneme.keys.values()]:
        assert secret not in output
