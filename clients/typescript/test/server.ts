/** `mneme serve` on a free port over a fresh store, for the tests: its URL and admin key. */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../../..");

export interface Served {
  url: string;
  adminKey: string;
  /** Runs `mneme ARGS…` on the server's store (embedded mode) and returns what it printed. */
  cli(...args: string[]): string;
  stop(): Promise<void>;
}

/** Starts `python -m mneme.cli serve --port 0 --workers 1` (MNEME_PYTHON, else the repository's .venv). */
export async function serve(): Promise<Served> {
  const home = mkdtempSync(join(tmpdir(), "mneme-ts-"));
  const python = process.env.MNEME_PYTHON ?? join(ROOT, ".venv", "bin", "python");
  const env = { ...process.env, MNEME_HOME: join(home, "store"), MNEME_URL: "" };
  const child: ChildProcess = spawn(python, ["-m", "mneme.cli", "serve", "--port", "0", "--workers", "1"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const url = await new Promise<string>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`mneme serve did not start:\n${output}`)), 120_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /serving on (http:\/\/\S+)/.exec(output);
      if (match?.[1] && output.includes("API key")) {
        clearTimeout(timer);
        ready(match[1]);
      }
    };
    child.stdout?.on("data", read);
    child.stderr?.on("data", read);
    child.on("exit", (code) => fail(new Error(`mneme serve exited (${code}):\n${output}`)));
  });
  const adminKey = readFileSync(join(home, "store", "admin.key"), "utf8").trim();
  return {
    url,
    adminKey,
    cli: (...args) => execFileSync(python, ["-m", "mneme.cli", ...args], { env, encoding: "utf8" }),
    async stop() {
      const exited = new Promise((done) => child.once("exit", done));
      child.kill("SIGINT");
      await exited;
      rmSync(home, { recursive: true, force: true });
    },
  };
}
