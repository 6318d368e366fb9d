/**
 * A TypeScript client for the Mneme memory API.
 *
 * `src/schema.d.ts` is generated from `docs/openapi.json` by openapi-typescript (`npm run generate`);
 * `client.api` is openapi-fetch over those types, so every route's path, parameters, body and answer are
 * typed end to end. `Mneme` adds a small layer for the agent loop: remember a conversation's messages,
 * recall, list and forget what was remembered, correct a fact, retrieve, propose and archive memories,
 * consolidate; every failure throws a `MnemeError`
 * carrying the API's error code. Retries: 429 and 503 for every call (honouring `Retry-After`), other
 * 5xx answers and dropped connections only for calls that are safe to repeat.
 */
import createClient, { type Client } from "openapi-fetch";

import type { components, paths } from "./schema.js";

export type { components, paths };
export type Schemas = components["schemas"];
export type RememberItem = Schemas["RememberItem"];
export type Remembered = Schemas["Remembered"];
export type RecallRequest = Schemas["RecallRequest"];
export type RecallResponse = Schemas["RecallResponse"];
export type RecallResult = Schemas["Result"];
export type Bundle = Schemas["Bundle"];
export type MemoryRecord = Schemas["MemoryRecord"];
export type MemoryView = Schemas["MemoryView"];
export type CreateMemoryRequest = Schemas["CreateMemoryRequest"];
export type ScopeView = Schemas["ScopeView"];
export type RunView = Schemas["RunView"];
export type RunStarted = Schemas["RunStarted"];
export type ChangesPage = Schemas["ChangesPage"];
export type Caller = Schemas["Caller"];
export type Health = Schemas["Health"];
export type EpisodeRecord = Schemas["EpisodeRecord"];
export type EpisodePage = Schemas["EpisodePage"];
export type FactRecord = Schemas["FactRecord"];
export type FactPage = Schemas["FactPage"];
export type Forgot = Schemas["Forgot"];
export type FactCorrection = Omit<Schemas["CorrectFactRequest"], "version">;

/** Filters of a list call: a session, a time range (ISO 8601 with a zone), metadata equality or `in`, paging. */
export interface ListOptions {
  sessionId?: string;
  since?: string;
  until?: string;
  metadata?: Record<string, string | number | boolean | (string | number | boolean)[]>;
  cursor?: string;
  limit?: number;
}

/** The query of a list call: each metadata key as `metadata.<key>`, repeated for a list of values. */
function listQuery(scope: string, options: ListOptions): Record<string, string | number | string[]> {
  const query: Record<string, string | number | string[]> = { scope };
  const plain = { session_id: options.sessionId, since: options.since, until: options.until, cursor: options.cursor };
  for (const [name, value] of Object.entries(plain)) if (value !== undefined) query[name] = value;
  if (options.limit !== undefined) query.limit = options.limit;
  for (const [key, value] of Object.entries(options.metadata ?? {})) {
    query[`metadata.${key}`] = (Array.isArray(value) ? value : [value]).map(String);
  }
  return query;
}

/** One message of a conversation, as agent frameworks hold them. */
export interface Message {
  role: string; // "user", "assistant", "tool", …
  content: string;
  name?: string; // who said it, when more precise than the role: stored as metadata.speaker
}

/** An answer that was not a success: the API's error code, message and details, and the HTTP status (0: no answer). */
export class MnemeError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    readonly details?: unknown,
  ) {
    super(`${code}: ${message}`);
    this.name = "MnemeError";
  }
}

export interface MnemeOptions {
  baseUrl: string;
  apiKey?: string;
  /** Per attempt, in milliseconds (default 10 000). */
  timeoutMs?: number;
  /** Retries after the first attempt (default 3; 0 turns them off). */
  maxRetries?: number;
  /** First backoff in milliseconds, doubled per attempt up to 8 s, with jitter (default 250). */
  backoffMs?: number;
  /** A Retry-After longer than this (seconds) is not waited for: the error is thrown (default 60). */
  maxRetryAfter?: number;
  fetch?: typeof fetch;
}

/** Calls that are safe to repeat after they may have reached the server: reads, and remember (idempotent by design). */
const SAFE_POSTS = new Set(["/v1/remember", "/v1/recall", "/v1/retrieve", "/v1/sttp/validate"]);
const RETRY_ALWAYS = new Set([429, 503]);
const RETRY_IF_SAFE = new Set([500, 502, 504]);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Seconds from a Retry-After header: a number of seconds or an HTTP date. */
export function retryAfterSeconds(value: string | null): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const when = Date.parse(value);
  return Number.isNaN(when) ? undefined : Math.max(0, (when - Date.now()) / 1000);
}

/** A fetch that applies Mneme's retry rules and a per-attempt timeout. */
export function retryingFetch(options: MnemeOptions): typeof fetch {
  const send = options.fetch ?? globalThis.fetch;
  const maxRetries = options.maxRetries ?? 3;
  const backoffMs = options.backoffMs ?? 250;
  const maxRetryAfter = options.maxRetryAfter ?? 60;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const backoff = (attempt: number) => {
    const ceiling = Math.min(8_000, backoffMs * 2 ** attempt);
    return ceiling / 2 + Math.random() * (ceiling / 2);
  };
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const path = new URL(request.url).pathname;
    const safe = ["GET", "HEAD", "PUT"].includes(request.method) || (request.method === "POST" && SAFE_POSTS.has(path));
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await send(new Request(request.clone(), { signal: AbortSignal.timeout(timeoutMs) }));
      } catch (error) {
        const refused = String((error as { cause?: { code?: string } }).cause?.code ?? "") === "ECONNREFUSED";
        if (attempt < maxRetries && (safe || refused)) {
          await sleep(backoff(attempt));
          continue;
        }
        throw new MnemeError("connection_failed", `${request.method} ${path} failed: ${error}`, 0, { attempts: attempt + 1 });
      }
      const retryable = RETRY_ALWAYS.has(response.status) || (safe && RETRY_IF_SAFE.has(response.status));
      if (!retryable || attempt >= maxRetries) return response;
      const after = retryAfterSeconds(response.headers.get("retry-after"));
      if (after !== undefined && after > maxRetryAfter) return response;
      await response.body?.cancel();
      await sleep(after !== undefined ? after * 1000 : backoff(attempt));
    }
  };
}

type Answer<T> = { data?: T; error?: unknown; response: Response };

/** The data of a success, or the API's error as a `MnemeError`. */
export function unwrap<T>({ data, error, response }: Answer<T>): T {
  if (response.ok && error === undefined) return data as T;
  const body = (error ?? {}) as { error?: { code?: string; message?: string; details?: unknown } };
  const detail = body.error;
  if (detail?.code) throw new MnemeError(detail.code, detail.message ?? "", response.status, detail.details);
  throw new MnemeError(`http_${response.status}`, `HTTP ${response.status}`, response.status);
}

export class Mneme {
  /** Every route, typed from the OpenAPI document (openapi-fetch). */
  readonly api: Client<paths>;

  constructor(options: MnemeOptions) {
    this.api = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      headers: options.apiKey ? { Authorization: `Bearer ${options.apiKey}` } : {},
      fetch: retryingFetch(options),
    });
  }

  async health(): Promise<Health> {
    return unwrap(await this.api.GET("/v1/health"));
  }

  /** The tenant, principal and roles of the API key. */
  async me(): Promise<Caller> {
    return unwrap(await this.api.GET("/v1/me"));
  }

  /** The Markdown bundle of a scope's curated guidance: what an agent reads before it starts. */
  async retrieve(path: string): Promise<string> {
    const answer = await this.api.POST("/v1/retrieve", {
      body: { path },
      headers: { Accept: "text/markdown" },
      parseAs: "text",
    });
    return unwrap(answer) as unknown as string;
  }

  async retrieveJson(path: string): Promise<Bundle> {
    const answer = await this.api.POST("/v1/retrieve", { body: { path }, headers: { Accept: "application/json" } });
    return unwrap(answer) as Bundle; // the route answers Markdown or JSON, as asked
  }

  /** Store one observation; a retry with the same idempotency_key returns the first result. */
  async remember(item: RememberItem): Promise<Remembered> {
    return unwrap(await this.api.POST("/v1/remember", { body: item })) as Remembered; // one item: one result
  }

  /** Store up to 100 observations all-or-nothing; results in the order of `items`. */
  async rememberBatch(items: RememberItem[]): Promise<Remembered[]> {
    const answer = unwrap(await this.api.POST("/v1/remember", { body: { items } }));
    return (answer as Schemas["RememberedBatch"]).items;
  }

  /**
   * Remember a conversation's messages as episodes of one session, in order. Each message's
   * idempotency key is `<sessionId>#<index>`, so passing the whole conversation again after each turn
   * stores only the new messages. The speaker (name, else role) is kept as `metadata.speaker`.
   */
  async rememberMessages(
    scope: string,
    sessionId: string,
    messages: Message[],
    options: { createScope?: boolean; metadata?: Record<string, unknown>; startedAt?: Date } = {},
  ): Promise<Remembered[]> {
    const start = (options.startedAt ?? new Date()).getTime();
    const items: RememberItem[] = messages.map((message, index) => ({
      scope,
      content: message.content,
      session_id: sessionId,
      idempotency_key: `${sessionId}#${index}`,
      occurred_at: new Date(start + index).toISOString(),
      create_scope: options.createScope ?? false,
      metadata: { ...options.metadata, role: message.role, speaker: message.name ?? message.role },
    }));
    const results: Remembered[] = [];
    for (let i = 0; i < items.length; i += 100) results.push(...(await this.rememberBatch(items.slice(i, i + 100))));
    return results;
  }

  /** Ranked search under a scope, with the token-budgeted context pack in `context`. */
  async recall(query: string, options: Omit<RecallRequest, "query"> = {}): Promise<RecallResponse> {
    return unwrap(await this.api.POST("/v1/recall", { body: { ...options, query } }));
  }

  /** One page of a scope's episodes (its subtree), newest first; `next_cursor` continues. */
  async listEpisodes(scope = "root", options: ListOptions = {}): Promise<EpisodePage> {
    return unwrap(await this.api.GET("/v1/episodes", { params: { query: listQuery(scope, options) } }));
  }

  async getEpisode(episodeId: string): Promise<EpisodeRecord> {
    return unwrap(await this.api.GET("/v1/episodes/{episode_id}", { params: { path: { episode_id: episodeId } } }));
  }

  /**
   * Forget one episode for good (writer): it leaves recall and lists at once, the change feed gets a
   * tombstone, and the facts drawn from it are settled (`settled` says how). Not resent once it may have arrived.
   */
  async forgetEpisode(episodeId: string, reason?: string): Promise<Forgot> {
    const params = { path: { episode_id: episodeId }, query: reason ? { reason } : {} };
    return unwrap(await this.api.DELETE("/v1/episodes/{episode_id}", { params }));
  }

  /** One page of a scope's facts (any status), newest first; the same filters as `listEpisodes`. */
  async listFacts(scope = "root", options: ListOptions = {}): Promise<FactPage> {
    return unwrap(await this.api.GET("/v1/facts", { params: { query: listQuery(scope, options) } }));
  }

  async getFact(factId: string): Promise<FactRecord> {
    return unwrap(await this.api.GET("/v1/facts/{fact_id}", { params: { path: { fact_id: factId } } }));
  }

  /** Forget one fact for good (approver); its source episodes stay. */
  async forgetFact(factId: string, reason?: string): Promise<Forgot> {
    const params = { path: { fact_id: factId }, query: reason ? { reason } : {} };
    return unwrap(await this.api.DELETE("/v1/facts/{fact_id}", { params }));
  }

  /** Correct a fact read at `version` (approver); a stale version is a `stale_version` MnemeError (409). */
  async correctFact(factId: string, version: number, correction: FactCorrection): Promise<FactRecord> {
    const answer = await this.api.PATCH("/v1/facts/{fact_id}", {
      params: { path: { fact_id: factId } },
      body: { ...correction, version },
    });
    return unwrap(answer);
  }

  /** A scoped or tagged curated memory; a writer's stays pending until an approver publishes it. */
  async createMemory(request: CreateMemoryRequest): Promise<MemoryRecord> {
    return unwrap(await this.api.POST("/v1/memories", { body: request }));
  }

  async archiveMemory(memoryId: string): Promise<MemoryView> {
    const answer = await this.api.POST("/v1/memories/{memory_id}/archive", {
      params: { path: { memory_id: memoryId } },
    });
    return unwrap(answer);
  }

  async listScopes(path = "root"): Promise<ScopeView[]> {
    return unwrap(await this.api.GET("/v1/scopes", { params: { query: { path } } })).scopes;
  }

  async createScope(path: string, parents = false): Promise<ScopeView> {
    return unwrap(await this.api.POST("/v1/scopes", { body: { path, parents } }));
  }

  /** Start consolidating the dirty scopes (all, or those under `scopes`); returns at once. */
  async consolidate(scopes?: string[]): Promise<RunStarted> {
    return unwrap(await this.api.POST("/v1/consolidate", { body: scopes ? { scopes } : {} }));
  }

  async getRun(runId: string): Promise<RunView> {
    return unwrap(await this.api.GET("/v1/consolidations/{run_id}", { params: { path: { run_id: runId } } }));
  }

  /** Poll until the run leaves `running`. */
  async waitRun(runId: string, { timeoutMs = 600_000, intervalMs = 500 } = {}): Promise<RunView> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const run = await this.getRun(runId);
      if (run.status !== "running") return run;
      if (Date.now() >= deadline) throw new Error(`run ${runId} still running after ${timeoutMs} ms`);
      await sleep(intervalMs);
    }
  }

  /** One page of the change feed after `cursor`; persist `next_cursor` to resume without gaps. */
  async changes(cursor?: string, limit = 100): Promise<ChangesPage> {
    return unwrap(await this.api.GET("/v1/changes", { params: { query: { cursor, limit } } }));
  }
}
