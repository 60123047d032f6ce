"""The storage layer does not leak: no circles in storage or snapshots, boto3 only behind ``S3Store``."""

from __future__ import annotations

import itertools

import grimp  # installed with import-linter (the dev extra)
import pytest


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("auditor", include_external_packages=True, cache_dir=None)


def test_no_module_of_storage_or_snapshots_imports_one_that_imports_it_back():
    graph = grimp.build_graph("auditor", cache_dir=None)
    modules = sorted(m for m in graph.modules if m.startswith(("auditor.storage", "auditor.snapshots")))
    downstream = {m: graph.find_downstream_modules(m) for m in modules}
    circles = [(a, b) for a, b in itertools.combinations(modules, 2) if b in downstream[a] and a in downstream[b]]
    assert circles == []


def test_the_interface_imports_no_backend(graph):
    imported = graph.find_modules_directly_imported_by("auditor.storage.base")
    assert not imported & {"auditor.storage.local", "auditor.storage.memory", "auditor.storage.s3"}


def test_only_the_s3_store_imports_the_s3_client(graph):
    clients = {"boto3", "botocore", "s3transfer"} & graph.modules
    assert clients, "nothing in auditor imports boto3: the S3 store lost its client?"
    importers = {m for c in clients for m in graph.find_modules_that_directly_import(c)}
    assert importers == {"auditor.storage.s3"}
