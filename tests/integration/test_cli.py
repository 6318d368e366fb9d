"""The `mneme` CLI: embedded mode on a tmp MNEME_HOME (main() + capsys), remote mode against the local server."""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from mneme import cli
from mneme.cli import app
from mneme.cli.config import KEYS
from mneme_sdk import Client as MnemeClient
from tests.support.legacy import forget_sessions
from tests.support.serve import mneme_serve

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run `mneme ARGS` in-process; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("MNEME_CONFIG", str(home.parent / "no-config.toml"))
    for name in ("MNEME_URL", "MNEME_API_KEY", "MNEME_TENANT", "MNEME_PRINCIPAL", "MNEME_ROLES", "MNEME_SCOPE"):
        monkeypatch.delenv(name, raising=False)
    (home.parent / "no-config.toml").write_text("")

    def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def ok(run: Any, *args: str, stdin: str | None = None) -> str:
    code, out, err = run(*args, stdin=stdin)
    assert code == 0, f"mneme {' '.join(args)} → {code}\n{out}\n{err}"
    return str(out)


def test_scopes_layers_and_memories(run: Any) -> None:
    assert "created root.acme.vat" in ok(run, "scopes", "create", "root.acme.vat", "--parents")
    assert ok(run, "scopes", "list") == "root\n  root.acme\n    root.acme.vat\n"
    assert json.loads(ok(run, "scopes", "list", "root.acme", "--json"))[1]["path"] == "root.acme.vat"
    assert "1  clients\n2  services" in ok(run, "layers", "set", "1=clients", "2=services")
    assert json.loads(ok(run, "layers", "get", "--json")) == {"1": "clients", "2": "services"}
    code, _, err = run("layers", "set", "clients")
    assert code == 2 and "DEPTH=NAME" in err

    out = ok(run, "memories", "create", "--key", "vat-policy", "--scope", "root.acme.vat", "Flat-rate VAT.")
    assert out.startswith("created vat-policy → root.acme.vat: published, version 1")
    memory_id = out.splitlines()[1]
    tagged = json.loads(
        ok(run, "memories", "create", "--key", "etiquette", "--tag", "clients=*", "--json", stdin="Use names.\n")
    )
    assert (tagged["target"], tagged["body"], tagged["status"]) == ("clients=*", "Use names.\n", "published")
    bundle = ok(run, "retrieve", "root.acme.vat")
    assert "<!-- scoped: root.acme.vat | priority: 9 | key: vat-policy -->\n```\nFlat-rate VAT.\n```" in bundle
    assert "tagged: clients=* | priority: 4 | key: etiquette" in bundle
    edited = json.loads(
        ok(
            run,
            "memories",
            "edit",
            memory_id,
            "--body",
            "Cash basis.",
            "--tags",
            "vat,scheme",
            "--version",
            "1",
            "--json",
        )
    )
    assert (edited["version"], edited["body"], edited["tags"]) == (2, "Cash basis.", ["vat", "scheme"])
    code, _, err = run("memories", "edit", memory_id, "--body", "x", "--version", "1")
    assert code == 2 and "error: version_conflict" in err
    assert "archived vat-policy" in ok(run, "memories", "archive", memory_id)
    assert "vat-policy" not in ok(run, "retrieve", "root.acme.vat")
    code, _, err = run("memories", "create", "--key", "x", "--scope", "root", "--tag", "clients=*", "body")
    assert code == 2 and "exactly one of --scope" in err

    assert "renamed root.acme → root.acme-ltd" in ok(run, "scopes", "rename", "root.acme", "root.acme-ltd")
    assert json.loads(ok(run, "retrieve", "root.acme.vat", "--json"))["canonical_path"] == "root.acme-ltd.vat"


def test_remember_text_files_stdin_and_recall(run: Any, tmp_path: Path) -> None:
    out = ok(run, "remember", "Acme moved its year end to 31 March.", "--scope", "root.acme", "--create-scope")
    assert out.startswith("ep_")
    ok(run, "remember", "--scope", "root.acme", "--metadata", '{"source": "call"}', stdin="Acme banks with Lloyds.\n")
    notes = [tmp_path / "a.md", tmp_path / "b.md"]
    notes[0].write_text("Acme's payroll runs on the 25th.")
    notes[1].write_text("Acme's VAT quarter ends in March.")
    out = ok(run, "remember", "--scope", "root.acme", "--file", str(notes[0]), "--file", str(notes[1]))
    assert out == "remembered 2 items: 2 new, 0 already stored\n"

    out = ok(run, "recall", "which bank does Acme use?", "--scope", "root.acme", "--limit", "3")
    assert out.startswith("3 results under root.acme (")
    first = out.split("\n\n")[1]
    assert "episode root.acme" in first and "Acme banks with Lloyds." in first and '"source": "call"' in first
    response = json.loads(ok(run, "recall", "payroll", "--scope", "root.acme", "--json"))
    assert response["results"][0]["content"] == "Acme's payroll runs on the 25th."
    assert ok(run, "recall", "payroll", "--scope", "root.acme", "--context").startswith("# recall: payroll")
    assert "nothing found" in ok(run, "recall", "zebra crossings", "--strictness", "precision", "--fallback", "never")
    code, out, err = run("recall", "anything", "--scope", "root.nowhere")
    assert code == 0 and out == "nothing found under root.nowhere (hybrid)\n"
    assert err == "warning: nothing is remembered under root.nowhere yet (no one has written there)\n"
    code, out, _ = run("recall", "anything", "--scope", "root.nowhere", "--json")
    assert code == 0 and json.loads(out)["warnings"] == ["scope_not_found"]
    code, _, err = run("retrieve", "root.nowhere")
    assert code == 2 and err == "error: scope_not_found: scope 'root.nowhere' does not exist\n"
    code, _, err = run("remember", "x", "--scope", "root.missing")
    assert code == 2 and "scope_not_found" in err and "create_scope" in err


def test_remember_while_the_embedder_is_down_says_the_episode_is_found_by_its_words(run: Any, tmp_path: Path) -> None:
    from mneme import bootstrap
    from mneme.errors import StoreUnavailable

    ok(run, "scopes", "create", "root.acme")
    services = bootstrap.current()

    class Down:
        model_id, dimension = services.embedder.model_id, services.embedder.dimension

        def embed(self, texts: Any) -> Any:
            raise StoreUnavailable("embedding model unavailable")

    services.remember.embedder = Down()  # type: ignore[assignment]
    out = ok(run, "remember", "Acme's auditor is Grant.", "--scope", "root.acme")
    assert out.startswith("ep_") and out.endswith(
        " (found by its words; by meaning once embedded: `mneme reindex --pending`)\n"
    )
    notes = [tmp_path / "a.md", tmp_path / "b.md"]
    notes[0].write_text("Acme's payroll runs on the 25th.")
    notes[1].write_text("Acme's VAT quarter ends in March.")
    out = ok(run, "remember", "--scope", "root.acme", "--file", str(notes[0]), "--file", str(notes[1]))
    deferred = "2 found by their words until embedded (`mneme reindex --pending`)"
    assert out == f"remembered 2 items: 2 new, 0 already stored, {deferred}\n"
    assert "Grant" in ok(run, "recall", "who audits Acme", "--scope", "root.acme")


def jsonl(path: Path, n: int, *, start: int = 0) -> Path:
    lines = [
        json.dumps({"content": f"Order {i}: oak doors for a customer in York.", "metadata": {"order": i}})
        for i in range(start, start + n)
    ]
    path.write_text("\n".join(lines) + "\n\n")
    return path


def test_remember_jsonl_in_batches_with_progress_and_idempotent_reruns(run: Any, tmp_path: Path) -> None:
    source = jsonl(tmp_path / "orders.jsonl", 250)
    code, out, err = run("remember", "--jsonl", str(source), "--scope", "root.orders", "--create-scope")
    assert code == 0, err
    assert out == "remembered 250 items: 250 new, 0 already stored\n"
    assert err.strip().splitlines()[-1].startswith("remember: 250/250 items (100%)")
    # Re-running the same file writes nothing twice: each line got an idempotency key from its content
    out = ok(run, "remember", "--jsonl", str(source), "--scope", "root.orders", "--batch-size", "50")
    assert out == "remembered 250 items: 0 new, 250 already stored\n"
    hits = json.loads(ok(run, "recall", "order 117 oak doors", "--scope", "root.orders", "--json", "--limit", "1"))
    assert hits["results"][0]["metadata"] == {"order": 117}
    # stdin works too, and --json gives every result
    results = json.loads(
        ok(run, "remember", "--jsonl", "-", "--scope", "root.orders", "--json", stdin='{"content": "x"}\n')
    )
    assert len(results) == 1 and results[0]["created"]


def test_remember_jsonl_names_the_bad_line(run: Any, tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text('{"content": "fine"}\n{"content": "fine too"}\n\n{"content": 3}\n')
    code, out, err = run("remember", "--jsonl", str(source), "--scope", "root", "--batch-size", "1")
    assert code == 2 and out == ""
    assert "error: invalid_input: line 4: content: Input should be a valid string" in err
    assert "2 items before the failing batch are stored" in err
    source.write_text('{"content": "fine"}\nnot json\n')
    code, _, err = run("remember", "--jsonl", str(source), "--scope", "root")
    assert code == 2 and "line 2: not JSON" in err
    source.write_text('{"content": "in a missing scope", "scope": "root.nope"}\n')
    code, _, err = run("remember", "--jsonl", str(source))
    assert code == 2 and "error: scope_not_found: line 1: item 0: scope 'root.nope' does not exist" in err


def test_ctrl_c_during_an_import_is_clean_and_a_rerun_finishes_it(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = jsonl(tmp_path / "orders.jsonl", 30)
    original = MnemeClient.remember_batch
    calls = 0

    def interrupted_on_the_third_batch(self: MnemeClient, items: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt
        return original(self, items)

    monkeypatch.setattr(MnemeClient, "remember_batch", interrupted_on_the_third_batch)
    code, out, err = run(
        "remember", "--jsonl", str(source), "--scope", "root.o", "--create-scope", "--batch-size", "10"
    )
    assert code == 130 and out == ""
    assert "interrupted after 20 stored items; run the same command again" in err
    monkeypatch.setattr(MnemeClient, "remember_batch", original)
    out = ok(run, "remember", "--jsonl", str(source), "--scope", "root.o", "--batch-size", "10")
    assert out == "remembered 30 items: 10 new, 20 already stored\n"


def test_consolidate_shows_progress_and_the_run_summary_then_status(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEME_CONSOLIDATION__SETTLE_SECONDS", "0")
    from mneme import bootstrap

    bootstrap.reset()
    for text in ("Acme's year end is 31 March.", "Acme's bank is Lloyds.", "Bolt's bank is Barclays."):
        ok(run, "remember", text, "--scope", "root.clients", "--create-scope")
    status = ok(run, "status")
    assert "tenant default" in status and "episodes 3" in status
    assert "dirty scopes 1 (root.clients)" in status and "index backlog  0 episode(s)" in status
    code, out, err = run("consolidate")
    assert code == 0, err
    assert "consolidating 1 scope(s) with the extractive reasoner" in err
    assert "root.clients: collect    3 episodes" in err  # the progress line
    assert "  collect    episodes_read 3" in out and out.strip().endswith("succeeded")
    report = json.loads(ok(run, "status", "--json"))
    tenant = report["tenants"]["default"]
    assert tenant["dirty_scopes"] == [] and tenant["episodes"] == 3 and tenant["facts"] >= 3
    assert report["index_backlog"] == {"episodes": 0, "capped": False}
    assert report["home"].endswith("home") and report["embedder"].startswith("all-MiniLM")
    hits = json.loads(ok(run, "recall", "Acme bank", "--kind", "fact", "--json"))
    assert hits["results"] and all(r["kind"] == "fact" for r in hits["results"])


def test_reindex_reports_the_turns_it_gave_back_to_their_session(run: Any) -> None:
    from mneme import bootstrap

    turn = ("--scope", "root.chat", "--create-scope", "--session-id", "van-1", "--json")
    first = json.loads(
        ok(run, "remember", "Which colour for the camper?", *turn, "--occurred-at", "2025-06-15T18:00:00Z")
    )
    ok(run, "remember", "Sage green.", *turn, "--occurred-at", "2025-06-15T18:01:00Z")
    forget_sessions(bootstrap.current().store, "default", [first["episode_id"]])

    out = ok(run, "reindex")

    assert "rebuilt 2 documents for tenant 'default'" in out
    assert "added 1 episodes written before the session index to their sessions" in out
    assert "added" not in ok(run, "reindex")


def test_keys_commands(run: Any) -> None:
    code, out, err = run("keys", "create", "--principal", "bot", "--roles", "reader,writer")
    assert code == 0 and out.startswith("mnk_") and "store this key now" in err
    listing = ok(run, "keys", "list")
    key_id = listing.split()[0]
    assert "bot" in listing and "reader,writer" in listing and "active" in listing
    assert ok(run, "keys", "revoke", key_id) == f"revoked {key_id}\n"
    assert "revoked" in ok(run, "keys", "list", "--json")
    other = json.loads(ok(run, "keys", "create", "--tenant", "acme", "--principal", "ci", "--roles", "admin", "--json"))
    assert other["tenant"] == "acme" and other["api_key"].startswith("mnk_")


def test_settings_precedence_flags_then_env_then_file(run: Any, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = home.parent / "mneme.toml"
    config.write_text('tenant = "from-file"\nprincipal = "filer"\ntimeout = 3\n')
    monkeypatch.setenv("MNEME_CONFIG", str(config))
    shown = json.loads(ok(run, "config", "--json"))
    assert shown["settings"]["tenant"] == {"value": "from-file", "source": f"file {config}"}
    assert shown["mode"] == "embedded (tenant from-file)"
    monkeypatch.setenv("MNEME_TENANT", "from-env")
    assert json.loads(ok(run, "config", "--json"))["settings"]["tenant"]["value"] == "from-env"
    shown = json.loads(ok(run, "--tenant", "from-flag", "config", "--json"))
    assert shown["settings"]["tenant"] == {"value": "from-flag", "source": "flag --tenant"}
    assert shown["settings"]["timeout"]["value"] == 3
    # The tenant reaches the embedded caller: a scope created for from-env is not in from-flag's tree
    ok(run, "scopes", "create", "root.only-env")
    assert "root.only-env" not in ok(run, "scopes", "list", "--tenant", "from-flag")
    assert "root.only-env" in ok(run, "scopes", "list")
    code, _, err = run("--url", "http://127.0.0.1:9", "recall", "x")
    assert code == 2 and "remote mode needs an API key" in err
    config.write_text("tennant = 'typo'\n")
    code, _, err = run("config")
    assert code == 2 and "unknown keys" in err and "tennant" in err


def test_remote_mode_against_the_local_server(run: Any, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file, _ = cli.ensure_first_run()
    remote = ("--url", server, "--api-key", key_file.read_text().strip())
    ok(run, *remote, "scopes", "create", "root.acme")
    assert ok(run, *remote, "remember", "Acme's year end is 31 March.", "--scope", "root.acme").startswith("ep_")
    assert "year end is 31 March" in ok(run, *remote, "recall", "year end", "--scope", "root.acme")
    monkeypatch.setenv("MNEME_URL", server)
    monkeypatch.setenv("MNEME_API_KEY_FILE", str(key_file))
    assert "root.acme" in ok(run, "scopes", "list")  # url and key from the environment
    code, out, err = run("consolidate")
    assert code == 0, err
    assert err.startswith("run run_") and "succeeded" in out
    started = ok(run, "consolidate", "--no-wait")
    assert started.startswith("run_")
    assert ok(run, "status").startswith(f"remote {server}: ok")
    code, _, err = run("reindex")
    assert code == 2 and "local store only" in err
    code, _, err = run("--api-key", "mnk_wrong", "scopes", "list")
    assert code == 2 and err.startswith("error: unauthorized:")


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], bool]]:
    """Every command and action, with whether it is a leaf (it takes the shared options)."""
    found: list[tuple[tuple[str, ...], bool]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                below = _commands(child, (*prefix, name))
                found += [((*prefix, name), not below), *below]
    return found


def test_help_everywhere_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _commands(app.parser())
    assert len(commands) >= 25
    assert cli.main(["--help"]) == 0
    assert "examples:\n  mneme serve" in capsys.readouterr().out
    for words, leaf in commands:
        assert cli.main([*words, "--help"]) == 0
        out = capsys.readouterr().out
        assert "examples:\n  mneme" in out, words
        if leaf:
            assert "--url" in out and "--home" in out, words


def test_python_dash_m_runs_the_cli() -> None:
    env = {"PYTHONPATH": f"{ROOT / 'shared'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "mneme.cli", "--help"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "mneme remember" in done.stdout


def test_export_and_import_with_progress_then_a_second_import_changes_nothing(run: Any, tmp_path: Path) -> None:
    ok(run, "layers", "set", "1=clients")
    ok(run, "memories", "create", "--key", "tone", "--scope", "root", "Be brief.")
    source = jsonl(tmp_path / "orders.jsonl", 120)
    ok(run, "remember", "--jsonl", str(source), "--scope", "root.acme", "--create-scope")
    target = tmp_path / "acme.jsonl"
    code, out, err = run("export", "--output", str(target))
    assert code == 0 and out == ""
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines[0]["type"] == "header" and sum(1 for line in lines if line["type"] == "episode") == 120
    assert f"exported {len(lines)} records of root (tenant default) to {target}" in err
    assert err.splitlines()[0].startswith(f"export: {len(lines)} records")  # the progress line
    assert not (tmp_path / "acme.jsonl.partial").exists()

    code, out, err = run("import", str(target), "--tenant", "copy")
    assert code == 0, err
    written = "1 scopes, 0 aliases, 1 memories, 0 revisions, 120 episodes, 0 facts"  # root exists in every tenant
    assert out == f"imported into tenant copy: {written}; 0 already present\n"
    assert f"import: {len(lines)}/{len(lines)} lines (100%)" in err
    assert "order 7" in ok(run, "recall", "Order 7: oak doors", "--tenant", "copy", "--limit", "1").lower()
    counts = json.loads(ok(run, "import", str(target), "--tenant", "copy", "--json"))
    assert counts["episodes"] == 0 and counts["memories"] == 0 and counts["skipped"] == 121
    assert ok(run, "export", "--tenant", "copy").count('"type":"episode"') == 120  # stdout by default


def test_an_import_is_all_or_nothing_or_with_continue_reports_what_it_did_not_write(run: Any, tmp_path: Path) -> None:
    # Given an export holding a memory whose key the importing tenant already uses
    ok(run, "memories", "create", "--key", "tone", "--scope", "root", "Be brief.")
    ok(run, "remember", "--jsonl", str(jsonl(tmp_path / "orders.jsonl", 30)), "--scope", "root.acme", "--create-scope")
    target = tmp_path / "acme.jsonl"
    ok(run, "export", "--output", str(target))
    ok(run, "memories", "create", "--key", "tone", "--scope", "root", "Be kind.", "--tenant", "copy")
    # When it is imported: refused, naming the line, and nothing written
    code, out, err = run("import", str(target), "--tenant", "copy")
    assert code == 2 and out == ""
    assert "error: memory_exists: line " in err and "nothing was imported" in err
    assert ok(run, "scopes", "list", "--tenant", "copy") == "root\n"
    # With --continue: everything else written, the one record reported, exit 1
    code, out, err = run("import", str(target), "--tenant", "copy", "--continue")
    assert code == 1, err
    assert out == "imported into tenant copy: 1 scopes, 0 aliases, 0 memories, 0 revisions, 30 episodes, 0 facts; " \
                  "0 already present; 1 not imported\n"  # fmt: skip
    assert "not imported: line " in err and "(memory " in err and ": memory_exists: " in err
    counts = json.loads(run("import", str(target), "--tenant", "copy", "--continue", "--json")[1])
    assert counts["skipped"] == 30 and [f["code"] for f in counts["failed"]] == ["memory_exists"]


def test_an_interrupted_export_leaves_no_file(run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mneme.services.portability import PortabilityService

    ok(run, "remember", "one", "--scope", "root")

    def interrupted(self: PortabilityService, *args: Any, **kwargs: Any) -> Any:
        yield {"type": "header"}
        raise KeyboardInterrupt

    monkeypatch.setattr(PortabilityService, "export", interrupted)
    code, _, err = run("export", "--output", str(tmp_path / "out.jsonl"))
    assert code == 130 and "interrupted: nothing was written" in err
    assert list(tmp_path.glob("out.jsonl*")) == []


def test_config_shows_every_effective_setting_with_its_default(run: Any) -> None:
    shown = json.loads(ok(run, "config", "--json"))["settings"]

    assert set(shown) == set(KEYS)
    assert shown["tenant"] == {"value": "default", "source": "default"}
    assert shown["scope"] == {"value": "root", "source": "default"}
    assert shown["timeout"] == {"value": 10.0, "source": "default"}
    assert "scope = 'root'  (default)" in ok(run, "config")


def test_status_counts_archived_memories(run: Any) -> None:
    out = ok(run, "memories", "create", "--key", "old-rule", "--scope", "root", "Retired guidance.")
    ok(run, "memories", "archive", out.splitlines()[1])
    ok(run, "memories", "create", "--key", "rule", "--scope", "root", "Current guidance.")

    assert json.loads(ok(run, "status", "--json"))["tenants"]["default"]["memories"] == {
        "published": 1,
        "pending": 0,
        "archived": 1,
    }


def test_a_busy_port_names_the_flag_that_chooses_another(run: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])

        code, _, err = run("serve", "--port", port, "--workers", "1")

    assert code != 0 and f"cannot listen on 127.0.0.1:{port}" in err
    assert "--port N" in err and "make serve PORT=N" in err


def test_make_serve_takes_the_port_from_port() -> None:
    def planned(*args: str) -> str:
        return subprocess.run(["make", "-n", "serve", *args], cwd=ROOT, capture_output=True, text=True).stdout

    assert ".venv/bin/mneme serve --port 9123\n" in planned("PORT=9123")
    assert ".venv/bin/mneme serve \n" in planned()


def test_mneme_serve_prints_no_metrics_however_many_requests_it_answers(tmp_path: Path) -> None:
    """Metrics are off in `mneme serve`: Powertools would still print every 100th value of a metric to stdout, and a
    server whose stdout is a pipe nobody reads then blocks for good once the pipe is full (as `mneme mcp`'s stdio
    would carry a message that is no JSON-RPC)."""
    home, log = tmp_path / "home", tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MNEME_", "POWERTOOLS_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "shared"), str(ROOT)])
    command = [sys.executable, "-m", "mneme.cli", "serve", "--port", "0", "--workers", "1", "--home", str(home)]
    with mneme_serve(command, tmp_path, env, log) as url:
        key = (home / "admin.key").read_text().strip()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
            for n in range(120):
                reply = api.post("/v1/recall", json={"query": f"where does Maya live {n}", "scope": "root"})
                assert reply.status_code == 200, reply.text
    assert '"_aws"' not in log.read_text()
