/** The TypeScript client against a real `mneme serve` (started here), and its retry rules against a stub. */
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import { Mneme, MnemeError, retryAfterSeconds } from "../src/index.js";
import { serve, type Served } from "./server.js";

let served: Served;
let admin: Mneme;

before(async () => {
  served = await serve();
  admin = new Mneme({ baseUrl: served.url, apiKey: served.adminKey, timeoutMs: 60_000 });
});

after(async () => {
  await served?.stop();
});

describe("against mneme serve", () => {
  test("health and the caller are typed answers", async () => {
    assert.equal((await admin.health()).status, "ok");
    const me = await admin.me();
    assert.equal(me.tenant, "default");
    assert.ok(me.roles.includes("admin"));
  });

  test("the agent loop: remember a conversation, recall it, and passing it again stores nothing twice", async () => {
    const messages = [
      { role: "user", content: "Which VAT scheme is Pennine Joinery on?", name: "Sam" },
      { role: "assistant", content: "Pennine Joinery is on the flat-rate VAT scheme since April." },
    ];
    const first = await admin.rememberMessages("root.pennine", "call-1", messages, { createScope: true });
    assert.deepEqual(first.map((r) => r.created), [true, true]);
    const again = await admin.rememberMessages("root.pennine", "call-1", [
      ...messages,
      { role: "user", content: "Thanks, and the year end is 31 March." },
    ]);
    assert.deepEqual(again.map((r) => r.created), [false, false, true]);
    assert.equal(again[0]?.episode_id, first[0]?.episode_id);

    const hits = await admin.recall("which VAT scheme is Pennine Joinery on?", { scope: "root.pennine", limit: 3 });
    const answer = hits.results.find((r) => r.content.startsWith("Pennine Joinery is on the flat-rate"));
    assert.equal(answer?.session_id, "call-1");
    assert.equal(answer?.metadata?.speaker, "assistant");
    const question = hits.results.find((r) => r.content.startsWith("Which VAT scheme"));
    assert.equal(question?.metadata?.speaker, "Sam");
    assert.match(hits.context, /flat-rate/);
  });

  test("what was remembered can be listed by metadata, forgotten, and a fact corrected and forgotten", async () => {
    const said = await admin.rememberMessages("root.users", "diet-1", [
      { role: "user", name: "Ines", content: "I am vegetarian, no meat at all." },
      { role: "user", name: "Ines", content: "My billing plan is Basic." },
    ], { createScope: true, metadata: { user: "ines" } });
    await admin.remember({ scope: "root.users", content: "Tobias: my billing plan is Gold.", metadata: { user: "tobias" } });
    const ines = await admin.listEpisodes("root.users", { metadata: { user: ["ines"] }, limit: 1 });
    assert.equal(ines.episodes.length, 1);
    assert.ok(ines.next_cursor);
    const rest = await admin.listEpisodes("root.users", { metadata: { user: "ines" }, cursor: ines.next_cursor ?? undefined });
    assert.deepEqual([...ines.episodes, ...rest.episodes].map((e) => e.id).sort(), said.map((r) => r.episode_id).sort());

    const forgot = await admin.forgetEpisode(said[0]!.episode_id, "the user asked");
    assert.deepEqual([forgot.kind, forgot.forgotten], ["episode", true]);
    const hits = await admin.recall("is Ines vegetarian?", { scope: "root.users", metadata: { user: "ines" } });
    assert.ok(!hits.results.some((r) => r.id === said[0]!.episode_id));
    await assert.rejects(admin.getEpisode(said[0]!.episode_id), (error: unknown) => {
      assert.ok(error instanceof MnemeError);
      assert.deepEqual([error.code, error.status], ["episode_forgotten", 404]);
      return true;
    });

    await admin.waitRun((await admin.consolidate(["root.users"])).run_id);
    const [fact] = (await admin.listFacts("root.users", { metadata: { user: "ines" } })).facts.filter((f) => f.tier === "raw");
    assert.ok(fact, "consolidation drew a fact from Ines's billing plan");
    const corrected = await admin.correctFact(fact.id, fact.version, { value: "Premium", reason: "upgraded" });
    assert.deepEqual([corrected.value, corrected.version], ["Premium", fact.version + 1]);
    await assert.rejects(admin.correctFact(fact.id, fact.version, { value: "Gold" }), /stale_version/);
    assert.equal((await admin.forgetFact(fact.id, "wrong")).kind, "fact");
    assert.ok(!(await admin.listFacts("root.users")).facts.some((f) => f.id === fact.id));
  });

  test("curated memories reach the bundle, as Markdown and as blocks, and leave it when archived", async () => {
    await admin.createScope("root.acme.vat", true);
    const memory = await admin.createMemory({ scope: "root.acme", key: "year-end", body: "Year end is 31 March." });
    assert.equal(memory.status, "published");
    const markdown = await admin.retrieve("root.acme.vat");
    // each body is fenced, so that no body can change the Markdown around it
    assert.match(markdown, /<!-- scoped: root\.acme \| priority: 6 \| key: year-end -->\n(`{3,})\nYear end is 31 March\.\n\1\n/);
    const bundle = await admin.retrieveJson("root.acme.vat");
    assert.deepEqual(bundle.blocks.map((b) => b.key), ["year-end"]);
    assert.equal((await admin.archiveMemory(memory.memory_id)).status, "archived");
    assert.doesNotMatch(await admin.retrieve("root.acme.vat"), /year-end/);
    assert.deepEqual((await admin.listScopes("root.acme")).map((s) => s.path), ["root.acme", "root.acme.vat"]);
  });

  test("errors carry the API's code, status and details", async () => {
    await assert.rejects(admin.retrieve("root.nowhere"), (error: unknown) => {
      assert.ok(error instanceof MnemeError);
      assert.deepEqual([error.code, error.status, error.details], ["scope_not_found", 404, { path: "root.nowhere" }]);
      return true;
    });
    const stranger = new Mneme({ baseUrl: served.url, apiKey: "mnk_not-a-key" });
    await assert.rejects(stranger.recall("anything"), { code: "unauthorized", status: 401 });
    await assert.rejects(admin.recall("x", { limit: 500 }), { code: "invalid_input", status: 400 });
  });

  test("recall over a path nobody has written to is empty and says so; retrieve is still a 404", async () => {
    const empty = await admin.recall("diet", { scope: "root.users.alice" });
    assert.deepEqual([empty.results, empty.warnings], [[], ["scope_not_found"]]);
    assert.match(empty.context, /nothing is remembered there yet/);
    await assert.rejects(admin.retrieve("root.users.alice"), { code: "scope_not_found", status: 404 });
    await assert.rejects(admin.recall("x", { scope: "root.Users" }), { code: "invalid_path", status: 400 });
  });

  test("a writer's key: its proposals are pending and admin routes are forbidden", async () => {
    const created = await admin.api.POST("/v1/keys", { body: { principal: "ts-agent", roles: ["writer"] } });
    const apiKey = created.data?.api_key ?? "";
    assert.ok(apiKey.startsWith("mnk_"));
    const writer = new Mneme({ baseUrl: served.url, apiKey });
    const proposal = await writer.createMemory({ scope: "root", key: "tone", body: "Be brief." });
    assert.equal(proposal.status, "pending");
    await assert.rejects(writer.createScope("root.other"), { code: "forbidden", status: 403 });
  });

  test("another tenant's key sees none of this tenant's records", async () => {
    await admin.remember({ scope: "root.private", content: "The door code is 4471.", create_scope: true });
    const created = JSON.parse(served.cli("keys", "create", "--tenant", "acme", "--principal", "ts", "--roles", "admin", "--json"));
    const stranger = new Mneme({ baseUrl: served.url, apiKey: created.api_key });
    assert.equal((await stranger.me()).tenant, "acme");
    await assert.rejects(stranger.retrieve("root.private"), { code: "scope_not_found", status: 404 });
    assert.deepEqual((await stranger.recall("door code", { scope: "root" })).results, []);
    const feed = (await stranger.changes()).changes; // its own root scope only
    assert.deepEqual(feed.map((c) => [c.kind, c.record?.segment]), [["scope", "root"]]);
  });

  test("the typed raw client reaches every route; consolidation runs to the end", async () => {
    const layers = await admin.api.PUT("/v1/layers", { body: { layers: { "1": "clients" } } });
    assert.deepEqual(layers.data?.layers, { "1": "clients" });
    const started = await admin.consolidate(["root.pennine"]);
    const run = await admin.waitRun(started.run_id, { timeoutMs: 120_000, intervalMs: 100 });
    assert.equal(run.status, "succeeded");
    const page = await admin.changes(undefined, 2);
    assert.equal(page.changes.length, 2);
    assert.ok(page.has_more && page.next_cursor);
  });
});

describe("retries, against a stub server", () => {
  test("429 with Retry-After is waited for; a 500 on a create is not resent", async () => {
    const replies = [
      { status: 429, body: { error: { code: "throttled", message: "slow down" } }, headers: { "Retry-After": "0" } },
      { status: 200, body: { results: [], retrieval_path: "hybrid", context: "# recall" }, headers: {} },
      { status: 500, body: { error: { code: "internal_error", message: "boom" } }, headers: {} },
    ];
    const seen: string[] = [];
    const stub = createServer((request, response) => {
      seen.push(`${request.method} ${request.url}`);
      const reply = replies.shift() ?? { status: 500, body: {}, headers: {} };
      response.writeHead(reply.status, { "Content-Type": "application/json", ...reply.headers });
      response.end(JSON.stringify(reply.body));
    });
    await new Promise<void>((listening) => stub.listen(0, "127.0.0.1", listening));
    const { port } = stub.address() as AddressInfo;
    try {
      const client = new Mneme({ baseUrl: `http://127.0.0.1:${port}`, apiKey: "k", backoffMs: 1 });
      assert.equal((await client.recall("q")).context, "# recall");
      await assert.rejects(client.createMemory({ scope: "root", key: "k", body: "b" }), { code: "internal_error" });
      assert.deepEqual(seen, ["POST /v1/recall", "POST /v1/recall", "POST /v1/memories"]);
    } finally {
      stub.close();
    }
    assert.equal(retryAfterSeconds("2"), 2);
    assert.equal(retryAfterSeconds(null), undefined);
  });
});
