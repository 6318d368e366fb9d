"""A full or read-only disk under the store, through the local server: a 507 or 503 whose code says which,
logged with a request id, nothing half-written, and everything working again once there is room.

The store lives on a small tmpfs mounted for the test (root only): skipped, with the reason, where the
machine does not allow mounting one."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from mneme import bootstrap
from mneme.models import Role

from .helpers import new_key

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def served_on(small_disk: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from mneme.local.server import make_server

    monkeypatch.setenv("MNEME_HOME", str(small_disk / "home"))
    bootstrap.reset()
    httpd = make_server("127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        bootstrap.reset()


def fill(disk: Path) -> Path:
    """A file that takes every free byte of the disk."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * size)
    return filler


def episodes(tenant: str) -> int:
    store: Any = bootstrap.current().store
    return int(store._rows("SELECT COUNT(*) FROM episodes WHERE tenant = ?", tenant)[0][0])


def batch(tag: str) -> dict[str, Any]:
    return {"items": [{"content": f"{tag} {i} " + "word " * 5000, "scope": "root"} for i in range(100)]}


def test_a_full_disk_is_a_507_that_writes_nothing_and_heals_when_there_is_room(
    served_on: str, small_disk: Path
) -> None:
    # Given a writer, a tenant root and one acknowledged episode
    key = new_key("acme", "alice", Role.admin)
    headers = {"Authorization": f"Bearer {key}"}
    bootstrap.current().scopes.root("acme")
    one = {"items": batch("before")["items"][:1]}
    first = requests.post(served_on + "/v1/remember", json=one, headers=headers, timeout=60)
    assert first.status_code == 201, first.text
    before = episodes("acme")
    # When the disk fills up
    filler = fill(small_disk)
    # Then a batch of remembers is refused with 507 storage_full and a request id, and none of it is stored
    full = requests.post(served_on + "/v1/remember", json=batch("during"), headers=headers, timeout=60)
    assert full.status_code == 507, full.text
    error = full.json()["error"]
    assert error["code"] == "storage_full" and error["details"]["request_id"] == full.headers["X-Request-Id"]
    assert episodes("acme") == before
    # And reading the change feed creates no empty cursor key (it answers 507 too, or serves with a whole key)
    changes = requests.get(served_on + "/v1/changes", headers=headers, timeout=60)
    cursor_key = small_disk / "home" / "cursor.key"
    assert changes.status_code in (200, 507), changes.text
    assert not cursor_key.exists() or len(cursor_key.read_text().strip()) == 64
    # When there is room again, the same batch is stored whole
    filler.unlink()
    again = requests.post(served_on + "/v1/remember", json=batch("during"), headers=headers, timeout=60)
    assert again.status_code == 201, again.text
    assert episodes("acme") == before + 100
    assert requests.get(served_on + "/v1/changes", headers=headers, timeout=60).status_code == 200
    assert len(cursor_key.read_text().strip()) == 64
