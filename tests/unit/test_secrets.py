import errno
import os
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from mneme.adapters.keyfiles import KeyFileDamaged, create_once
from mneme.adapters.secrets import fetch_secret
from mneme.bootstrap import cursor_secret
from mneme.cli import ensure_first_run
from mneme.errors import StorageFull, StoreUnavailable
from mneme.settings import DynamoStore, Settings

ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:mneme-cursor-AbCdEf"


def client() -> object:
    return boto3.client("secretsmanager", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")


def test_the_cursor_secret_is_read_from_secrets_manager() -> None:
    sm = client()
    with Stubber(sm) as stub:
        stub.add_response("get_secret_value", {"SecretString": "s3cret"}, {"SecretId": ARN})
        assert fetch_secret(ARN, client=sm) == b"s3cret"


def test_an_unreadable_secret_is_store_unavailable() -> None:
    sm = client()
    with Stubber(sm) as stub:
        stub.add_client_error("get_secret_value", "AccessDeniedException", http_status_code=400)
        with pytest.raises(StoreUnavailable):
            fetch_secret(ARN, client=sm)


def test_dynamodb_without_a_configured_secret_refuses_to_sign_but_only_when_asked() -> None:
    source = cursor_secret(Settings(store=DynamoStore(kind="dynamodb", table_name="t")))  # building is fine
    with pytest.raises(StoreUnavailable, match="MNEME_CURSOR_SECRET_ARN"):
        source()


# -- the embedded engine's key files -------------------------------------------------------------------


def test_the_cursor_key_is_created_once_whole_and_reused(tmp_path: Path) -> None:
    first = cursor_secret(Settings(home=tmp_path))()  # type: ignore[call-arg]
    again = cursor_secret(Settings(home=tmp_path))()  # type: ignore[call-arg]
    assert first == again and len(first) == 64
    assert (tmp_path / "cursor.key").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["cursor.key"]  # no temporary file left behind


@pytest.mark.parametrize("content", ["", "\n", "abc123"])
def test_an_empty_or_short_cursor_key_is_refused_not_used(tmp_path: Path, content: str) -> None:
    (tmp_path / "cursor.key").write_text(content)
    with pytest.raises(KeyFileDamaged, match=r"cursor\.key"):
        cursor_secret(Settings(home=tmp_path))()  # type: ignore[call-arg]


@pytest.mark.parametrize("secret", ["", "   ", "short"])
def test_an_empty_or_short_configured_secret_is_refused(secret: str) -> None:
    with pytest.raises(StoreUnavailable, match="MNEME_CURSOR_SECRET"):
        cursor_secret(Settings(cursor_secret=secret))()  # type: ignore[arg-type]


def test_a_key_file_that_cannot_be_written_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StorageFull):
        create_once(tmp_path / "cursor.key", "x" * 64)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_admin_key_stops_serve_with_one_line(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "admin.key").write_text("")
    with pytest.raises(KeyFileDamaged, match=r"admin\.key"):
        ensure_first_run()


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda path: path.write_bytes(b"\xff\xfe" + b"\x80" * 64), "not UTF-8 text"),
        (lambda path: path.mkdir(), "a directory"),
    ],
    ids=["not-utf8", "directory"],
)
def test_a_cursor_key_that_cannot_be_read_as_text_is_refused_not_a_500(
    tmp_path: Path, damage: Callable[[Path], object], says: str
) -> None:
    damage(tmp_path / "cursor.key")
    with pytest.raises(KeyFileDamaged, match=says):
        cursor_secret(Settings(home=tmp_path))()  # type: ignore[call-arg]
