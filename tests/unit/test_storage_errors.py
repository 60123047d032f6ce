"""The blob store's public methods do the shared work once: check the key, call the backend, wrap its errors naming the key.

No server: the S3 store gets a stand-in client that raises what botocore raises.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import IO

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from auditor.errors import InfrastructureError, NotFound, ObjectConflict, UnsafePath
from auditor.storage import BlobStore, open_store
from auditor.storage.s3 import S3Store, is_s3_error


class Recording(BlobStore):
    """A backend that records which keys reach it and raises what it is told to."""

    uri = "test://recording"

    def __init__(self, raises: BaseException | None = None) -> None:
        self.seen: list[str] = []
        self.raises = raises

    def _hit(self, key: str) -> None:
        self.seen.append(key)
        if self.raises is not None:
            raise self.raises

    def _write(self, key: str, data: bytes | Path, overwrite: bool) -> bool:
        self._hit(key)
        return True

    def _read(self, key: str) -> bytes:
        self._hit(key)
        return b""

    def _download(self, key: str, out: IO[bytes]) -> None:
        out.write(b"partial")
        self._hit(key)

    def _exists(self, key: str) -> bool:
        self._hit(key)
        return True

    def _list(self, prefix: str) -> Iterable[str]:
        self._hit(prefix)
        return ["b", "a", "elsewhere"]


def test_an_unsafe_key_is_refused_before_the_backend_sees_it(tmp_path):
    store = Recording()
    for call in (
        lambda: store.write("../x", b""),
        lambda: store.read("a//b"),
        lambda: store.exists("/abs"),
        lambda: store.download("a/../b", tmp_path / "out"),
        lambda: store.local_path("."),
    ):
        with pytest.raises(UnsafePath):
            call()
    assert store.seen == []
    assert not (tmp_path / "out").exists()


def test_list_is_sorted_and_filtered_by_the_base_class():
    assert list(Recording().list("")) == ["a", "b", "elsewhere"]
    assert list(Recording().list("e")) == ["elsewhere"]


def test_an_os_error_of_any_backend_is_an_infrastructure_error_naming_store_and_key():
    store = Recording(PermissionError(13, "Permission denied"))
    with pytest.raises(InfrastructureError, match=r"cannot read 'some/key' in test://recording: Permission denied"):
        store.read("some/key")


def test_another_exception_passes_unchanged():
    with pytest.raises(ZeroDivisionError):
        Recording(ZeroDivisionError()).read("k")


def test_a_failed_download_leaves_no_file(tmp_path):
    dest = tmp_path / "out.bin"
    with pytest.raises(InfrastructureError, match="'k'"):
        Recording(OSError(5, "Input/output error")).download("k", dest)
    assert not dest.exists()


def test_a_download_into_a_missing_folder_is_an_infrastructure_error(tmp_path):
    store = open_store(f"memory://errors-{uuid.uuid4().hex}")
    store.write("k", b"x")
    with pytest.raises(InfrastructureError, match="folder does not exist"):
        store.download("k", tmp_path / "no" / "such" / "out.bin")


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path) -> BlobStore:
    if request.param == "memory":
        return open_store(f"memory://errors-{uuid.uuid4().hex}")
    return open_store(tmp_path / "store")


def test_a_missing_source_file_is_not_found_naming_the_key_on_every_backend(store, tmp_path):
    with pytest.raises(NotFound, match=r"cannot store 'the/key'.*does not exist"):
        store.write("the/key", tmp_path / "absent.bin")


def test_an_unreadable_source_is_an_infrastructure_error_naming_the_key(store, tmp_path):
    # A folder given as the file to stream: the backend's open() fails with IsADirectoryError.
    with pytest.raises(InfrastructureError, match=r"cannot write 'the/key' in "):
        store.write("the/key", tmp_path)


def test_a_local_store_whose_root_is_a_file_names_the_key(tmp_path):
    root = tmp_path / "not-a-folder"
    root.write_bytes(b"")
    with pytest.raises(InfrastructureError, match=rf"cannot write 'k' in {root}"):
        open_store(root).write("k", b"x")


def test_a_local_object_under_an_object_is_a_conflict_naming_the_key(tmp_path):
    store = open_store(tmp_path / "store")
    store.write("a", b"x")
    with pytest.raises(ObjectConflict, match="'a/b/c'"):
        store.write("a/b/c", b"y")


class RaisingClient:
    """A stand-in boto3 client: every call raises ``exc``."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            raise self.exc

        return call


def _client_error(code: str, operation: str = "GetObject") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


@pytest.mark.parametrize(
    ("call", "action"),
    [
        (lambda s, tmp: s.read("the/key"), "read"),
        (lambda s, tmp: s.write("the/key", b"x"), "write"),
        (lambda s, tmp: s.exists("the/key"), "look up"),
        (lambda s, tmp: s.download("the/key", tmp / "out.bin"), "download"),
        (lambda s, tmp: s.stream_version("the/key", "v1"), "read"),
    ],
)
def test_an_s3_error_is_wrapped_naming_the_bucket_and_key(call, action, tmp_path):
    store = S3Store("bucket", "p", client=RaisingClient(_client_error("AccessDenied")))
    with pytest.raises(InfrastructureError, match=rf"S3 refused to {action} s3://bucket/p/the/key: AccessDenied"):
        call(store, tmp_path)
    assert not (tmp_path / "out.bin").exists()


def test_an_unreachable_s3_server_is_an_infrastructure_error_naming_the_key():
    store = S3Store("bucket", "p", client=RaisingClient(EndpointConnectionError(endpoint_url="http://127.0.0.1:1")))
    with pytest.raises(InfrastructureError, match="s3://bucket/p/the/key"):
        store.read("the/key")


def test_s3_store_wide_calls_name_the_store():
    store = S3Store("bucket", "p", client=RaisingClient(_client_error("AccessDenied", "ListObjectsV2")))
    with pytest.raises(InfrastructureError, match="s3://bucket/p"):
        list(store.list())
    with pytest.raises(InfrastructureError, match="s3://bucket/p"):
        store.object_lock()
    with pytest.raises(InfrastructureError, match="s3://bucket/p"):
        store.list_versions()


def test_a_missing_s3_object_is_not_found_naming_the_key():
    store = S3Store("bucket", "p", client=RaisingClient(_client_error("NoSuchKey")))
    with pytest.raises(NotFound, match="s3://bucket/p/the/key"):
        store.read("the/key")
    assert store.exists("the/key") is False
    assert store.stream_version("the/key", "v1") is None


def test_a_non_s3_exception_from_the_client_passes_unchanged():
    with pytest.raises(ZeroDivisionError):
        S3Store("bucket", client=RaisingClient(ZeroDivisionError())).read("k")


def test_one_rule_says_what_an_s3_error_is():
    assert is_s3_error(_client_error("AccessDenied"))
    assert is_s3_error(EndpointConnectionError(endpoint_url="http://x"))
    assert not is_s3_error(OSError("disk"))
    assert not is_s3_error(NotFound("x"))
