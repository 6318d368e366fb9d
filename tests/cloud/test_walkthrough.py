"""The README walk-through, command by command, against the deployed shape.

The commands are read from README.md (every `api …` line and the operator's `mneme keys create`), so the
README and this test cannot drift apart; the bundle the README prints is compared with the one returned.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from tests.cloud.conftest import Cloud
from tests.cloud.gateway import Response

README = Path(__file__).resolve().parents[2] / "README.md"


def walkthrough() -> tuple[list[list[str]], str]:
    """(the commands of the walk-through's sh blocks, split like a shell would; the bundle block it shows)."""
    text = README.read_text()
    section = text.split("## Walk-through", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words and (words[0] == "api" or words[0].endswith("mneme")):
                commands.append(words)
    # the bundle's own fence is longer than the body fences inside it
    ((_, bundle),) = re.findall(r"^(`{3,})markdown\n(.*?)^\1$", section, re.S | re.M)
    return commands, bundle


def run(cloud: Cloud, words: list[str], key: str, vars: dict[str, str]) -> Response:
    method, headers, body, url = None, {}, None, None
    args = iter(words[1:])
    for word in args:
        if word == "-X":
            method = next(args)
        elif word == "-H":
            name, _, value = next(args).partition(": ")
            headers[name] = value
        elif word == "-d":
            body = next(args)
        else:
            url = word
    assert url is not None, words
    path = url.replace("$MNEME", "")
    for name, value in vars.items():
        path = path.replace(f"<{name}>", value)
        body = body and body.replace(f"<{name}>", value)
    method = method or ("POST" if body is not None else "GET")
    headers.setdefault("Content-Type", "application/json")
    return cloud.gateway.request(method, path, body=body, key=key, headers=headers)


def headers_of(markdown: str) -> list[str]:
    """The block headers, memory ids cut (they differ per run, the README shows them shortened)."""
    return [re.sub(r" \| memory_id: [^ ]+", "", line) for line in markdown.splitlines() if line.startswith("<!-- ")]


def test_the_readme_walkthrough(cloud: Cloud) -> None:
    commands, shown_bundle = walkthrough()
    assert len(commands) >= 12, "the walk-through lost its commands"
    key = cloud.operator_key("default", "admin", "admin")  # docs/deploy.md: the first API key
    vars: dict[str, str] = {}
    answers: list[tuple[list[str], Any]] = []
    for words in commands:
        if words[0].endswith("mneme"):  # the operator's CLI, embedded mode on the table
            assert words[1:3] == ["keys", "create"], words
            options = dict(zip(words[3::2], words[4::2], strict=True))
            cloud.operator_key(options["--tenant"], options["--principal"], *options["--roles"].split(","))
            continue
        response = run(cloud, words, key, vars)
        assert 200 <= response.status < 300, f"{shlex.join(words)}\n  -> {response}"
        if response.headers.get("Content-Type", "").startswith("application/json"):  # ids the next commands name
            answer = response.json()
            found = {"run_id": answer.get("run_id"), "draft_id": answer.get("draft_id")}
            found["fingerprint"] = answer.get("preview", {}).get("fingerprint") if isinstance(answer, dict) else None
            vars.update({name: value for name, value in found.items() if value})
        answers.append((words, response))

    retrieves = [r for w, r in answers if w[-1].startswith('{"path"') and "/v1/retrieve" in " ".join(w)]
    first, after_rename, as_json = retrieves
    assert headers_of(first.body) == headers_of(shown_bundle)
    assert first.body.splitlines()[0] == shown_bundle.splitlines()[0]
    assert [h.replace("root.pennine-joinery", "root.pennine") for h in headers_of(shown_bundle)] == headers_of(
        after_rename.body
    )
    assert as_json.json()["canonical_path"] == "root.pennine.vat"

    remember, conversation = [r for w, r in answers if "/v1/remember" in " ".join(w)]
    assert [item["created"] for item in conversation.json()["items"]] == [True, True]  # one episode a message
    (recall,) = [r for w, r in answers if "/v1/recall" in " ".join(w)]
    found = recall.json()
    (episode,) = [r for r in found["results"] if r["id"] == remember.json()["episode_id"]]
    assert episode["metadata"] == {"source": "call"}
    assert found["retrieval_path"] == "hybrid", found["retrieval_path"]  # BM25 and kNN both answered
    (run_record,) = [r for w, r in answers if "/v1/consolidations/" in " ".join(w)]
    assert run_record.json()["run_id"] == vars["run_id"]
    (published,) = [r for w, r in answers if w[-1].startswith('{"fingerprint"')]
    assert published.json()["status"] == "published"
