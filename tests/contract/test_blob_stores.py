"""One contract, three blob stores: memory, a local directory, and S3 (moto's server on loopback, via boto3)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from auditor.errors import BadInput, NotFound, UnknownScheme, UnsafePath
from auditor.storage import BlobStore, open_store
from auditor.storage.local import LocalStore
from auditor.storage.memory import MemoryStore
from auditor.storage.s3 import S3Store


@pytest.fixture(params=["memory", "local", "s3"])
def store(request, tmp_path) -> BlobStore:
    if request.param == "memory":
        return open_store(f"memory://contract-{uuid.uuid4().hex}")
    if request.param == "local":
        return open_store(tmp_path / "store")
    bucket = request.getfixturevalue("s3_bucket")
    return open_store(f"s3://{bucket}/some/prefix")


def test_open_store_picks_the_backend_from_the_uri_scheme(tmp_path):
    assert isinstance(open_store("memory://x"), MemoryStore)
    assert isinstance(open_store(tmp_path), LocalStore)
    assert isinstance(open_store(f"file://{tmp_path}"), LocalStore)
    assert open_store(f"file://{tmp_path}").root == tmp_path
    s3 = open_store("s3://bucket/a/prefix/")
    assert isinstance(s3, S3Store) and (s3.bucket, s3.prefix) == ("bucket", "a/prefix")


def test_an_unknown_scheme_is_refused_listing_the_valid_ones():
    with pytest.raises(UnknownScheme, match="s3://"):
        open_store("gopher://host/x")


def test_what_is_written_reads_back_byte_for_byte(store):
    payload = bytes(range(256)) * 100
    assert store.write("a/b/c.bin", payload) is True
    assert store.read("a/b/c.bin") == payload
    assert store.exists("a/b/c.bin")


def test_a_second_write_of_an_existing_key_is_refused_and_keeps_the_first_bytes(store):
    assert store.write("k", b"first") is True
    assert store.write("k", b"second") is False
    assert store.read("k") == b"first"


def test_overwrite_replaces_the_bytes_when_asked_for(store):
    store.write("k", b"first")
    assert store.write("k", b"second", overwrite=True) is True
    assert store.read("k") == b"second"


def test_a_file_is_streamed_into_the_store(store, tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(b"x" * 300_000)
    assert store.write("from/file", source) is True
    assert store.read("from/file") == b"x" * 300_000


def test_racing_writers_leave_exactly_one_object(store):
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def writer(n: int) -> None:
        barrier.wait()
        results.append(store.write("contended", f"writer {n}".encode()))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 1
    assert store.read("contended") in {f"writer {n}".encode() for n in range(8)}


def test_reading_a_missing_key_raises_not_found_naming_the_key(store):
    with pytest.raises(NotFound, match="no/such/key"):
        store.read("no/such/key")
    assert not store.exists("no/such/key")


def test_download_writes_the_object_to_a_new_file(store, tmp_path):
    store.write("obj", b"payload")
    dest = tmp_path / "out.bin"
    store.download("obj", dest)
    assert dest.read_bytes() == b"payload"


def test_download_refuses_to_replace_an_existing_file(store, tmp_path):
    store.write("obj", b"payload")
    dest = tmp_path / "out.bin"
    dest.write_bytes(b"mine")
    with pytest.raises(BadInput, match="exists"):
        store.download("obj", dest)
    assert dest.read_bytes() == b"mine"


def test_download_of_a_missing_key_raises_not_found_and_leaves_no_file(store, tmp_path):
    dest = tmp_path / "out.bin"
    with pytest.raises(NotFound, match="missing/key"):
        store.download("missing/key", dest)
    assert not dest.exists()


def test_list_gives_every_key_under_a_prefix_in_sorted_order(store):
    for key in ["b/2", "a/1", "b/1", "c", "b/sub/3"]:
        store.write(key, key.encode())
    assert list(store.list("b/")) == ["b/1", "b/2", "b/sub/3"]
    assert list(store.list()) == ["a/1", "b/1", "b/2", "b/sub/3", "c"]
    assert list(store.list("nothing/")) == []


@pytest.mark.parametrize("key", ["../escape", "/absolute", "a//b", "a/./b", "a/../b", "", "back\\slash"])
def test_keys_that_could_escape_the_store_are_refused(store, key):
    with pytest.raises(UnsafePath):
        store.write(key, b"x")
    with pytest.raises(UnsafePath):
        store.read(key)


def test_only_a_local_store_hands_out_file_paths(store):
    store.write("obj", b"payload")
    path = store.local_path("obj")
    if isinstance(store, LocalStore):
        assert path is not None and Path(path).read_bytes() == b"payload"
    else:
        assert path is None


def test_a_missing_bucket_is_reported_by_name(s3_endpoint):
    missing = open_store(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/p")
    with pytest.raises(NotFound, match="no-such-bucket"):
        missing.write("k", b"x")


def test_an_unreachable_s3_endpoint_is_an_infrastructure_error_naming_the_key():
    import boto3
    from botocore.config import Config

    from auditor.errors import InfrastructureError
    from tests.fixtures.common import free_port

    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{free_port()}",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=1),
    )
    with pytest.raises(InfrastructureError, match="s3://bucket/p/the/key"):
        S3Store("bucket", "p", client=client).read("the/key")
