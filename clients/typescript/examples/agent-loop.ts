/**
 * The agent loop with the TypeScript client: read the scope's guidance, remember the conversation,
 * recall before answering. Against `make serve` (run from clients/typescript):
 *
 *   npm ci && npm run build && node dist/examples/agent-loop.js
 *
 * MNEME_URL and MNEME_API_KEY choose another API (default: the local one and ../../.mneme/admin.key).
 */
import { readFileSync } from "node:fs";

import { Mneme, MnemeError } from "../src/index.js";

const mneme = new Mneme({
  baseUrl: process.env.MNEME_URL ?? "http://127.0.0.1:8080",
  apiKey: process.env.MNEME_API_KEY ?? readFileSync("../../.mneme/admin.key", "utf8").trim(),
});

const scope = "root.examples.typescript";
await mneme.rememberMessages(
  scope,
  "support-call-7",
  [
    { role: "user", name: "Priya", content: "Our invoices must show the PO number, or finance rejects them." },
    { role: "assistant", content: "Noted: every invoice carries the PO number." },
  ],
  { createScope: true },
);

const hits = await mneme.recall("what must invoices show?", { scope, limit: 2 });
for (const hit of hits.results) console.log(`${hit.score.toFixed(2)} ${hit.metadata?.speaker}: ${hit.content}`);

try {
  await mneme.retrieve("root.no-such-scope");
} catch (error) {
  if (error instanceof MnemeError) console.log(`error ${error.status} ${error.code}`);
}

// A scope nobody has written to yet (a new user): recall answers empty and says so, with no try/catch
const nobody = await mneme.recall("diet", { scope: "root.users.new-user" });
console.log(`${nobody.results.length} results, warnings: ${(nobody.warnings ?? []).join(", ")}`);
