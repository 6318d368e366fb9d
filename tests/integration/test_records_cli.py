"""`mneme episodes` / `mneme facts` and `mneme recall --where` in embedded mode (main() + capsys)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.test_cli import ok, run

__all__ = ["run"]  # the fixture, used by name
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


def test_list_show_forget_episodes_and_recall_where(run: Any) -> None:
    for who, text in (("ines", "Ines: I am vegetarian."), ("tobias", "Tobias: I am vegetarian too.")):
        ok(run, "remember", text, "--scope", "root.users", "--create-scope", "--metadata", json.dumps({"user": who}))
    listed = json.loads(ok(run, "episodes", "list", "--where", "user=ines", "--json"))
    [ines] = listed["episodes"]
    assert ines["content"] == "Ines: I am vegetarian." and listed["has_more"] is False
    recalled = json.loads(ok(run, "recall", "vegetarian", "--where", "user=tobias", "--json"))
    assert [r["metadata"]["user"] for r in recalled["results"]] == ["tobias"]
    assert json.loads(ok(run, "episodes", "show", ines["id"]))["metadata"] == {"user": "ines"}

    assert f"forgot episode {ines['id']}" in ok(run, "episodes", "forget", ines["id"], "--reason", "asked")
    code, _, err = run("episodes", "show", ines["id"])
    assert code == 2 and "episode_forgotten" in err
    assert "no facts" in ok(run, "facts", "list", "--scope", "root.users")
    code, _, err = run("episodes", "list", "--where", "no-equals-sign")
    assert code == 2 and "KEY=VALUE" in err
