"""Code outside the repository (issue 13, point 5): a package installed from a local folder is pinned by content.

The installs are *faked*, and honestly so: a ``featurepipe-1.0.dist-info`` folder with a real
``direct_url.json`` (PEP 610, as pip and uv write it) is put in a temporary site folder on
``sys.path``, which is exactly what ``importlib.metadata`` reads; the source folder is a real git
repository with real files. Installing into a throwaway venv would add minutes and test pip, not us.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from auditor.lineage.gather import environment_info, local_packages
from auditor.lineage.record import RunRecord
from auditor.lineage.traced import compare
from auditor.rebuild.drift import environment_drift
from tests.fixtures.gitrepo import git, init_repo


def _dist_info(site: Path, name: str, version: str, direct_url: dict, record_files: dict[str, bytes] | None = None) -> Path:
    folder = site / f"{name}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (folder / "direct_url.json").write_text(json.dumps(direct_url))
    lines = []
    for rel, data in (record_files or {}).items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{rel},sha256={digest},{len(data)}")
    lines.append(f"{folder.name}/RECORD,,")
    (folder / "RECORD").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture()
def editable(tmp_path, monkeypatch) -> Path:
    source = init_repo(tmp_path / "featurepipe", {"pyproject.toml": "[project]\nname='featurepipe'\nversion='1.0'\n", "featurepipe/__init__.py": "SCALE = 2.0\n"})
    site = tmp_path / "site"
    _dist_info(site, "featurepipe", "1.0", {"url": source.as_uri(), "dir_info": {"editable": True}})
    _dist_info(site, "fromindex", "2.0", {"url": "https://files.example.invalid/fromindex-2.0.whl", "archive_info": {}})
    monkeypatch.syspath_prepend(str(site))
    return source


def test_an_editable_package_is_recorded_with_path_commit_dirty_flag_and_digest(editable):
    found = local_packages()
    assert "fromindex" not in found  # a remote URL carries its own id
    pkg = found["featurepipe"]
    assert pkg.version == "1.0" and pkg.editable and pkg.path == str(editable)
    assert pkg.commit == git(editable, "rev-parse", "HEAD").strip() and pkg.dirty is False
    assert pkg.tree_digest.startswith("sha256:") and pkg.files == 2 and pkg.error is None
    # __pycache__ and the auditor's folders are not the package's content
    (editable / "featurepipe" / "__pycache__").mkdir()
    (editable / "featurepipe" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (editable / "mlruns").mkdir()
    (editable / "mlruns" / "m").write_text("m")
    again = local_packages()["featurepipe"]
    assert again.tree_digest == pkg.tree_digest and again.dirty is False


def test_a_change_without_a_version_bump_is_named_by_drift_and_blocks_the_comparison(editable):
    before = environment_info()
    (editable / "featurepipe" / "__init__.py").write_text("SCALE = 3.0\n")  # same version string
    after = environment_info()
    old, new = before.local_packages["featurepipe"], after.local_packages["featurepipe"]
    assert old.version == new.version == "1.0" and new.dirty is True and old.tree_digest != new.tree_digest

    drift = environment_drift(before, after)
    assert drift.fields["local_packages.featurepipe.tree_digest"] == (old.tree_digest, new.tree_digest)
    assert drift.fields["local_packages.featurepipe.dirty"] == (False, True)
    assert drift.changed["featurepipe"][0] == "1.0" and "other content" in drift.changed["featurepipe"][1]

    [finding] = [f for f in compare(RunRecord(environment=before), RunRecord(environment=after)) if f.blocking]
    assert finding.blocking and finding.code == "environment.local_package_changed"
    assert "featurepipe" in finding.message and "version 1.0 both times" in finding.message

    # a commit of the change: clean again, but still other code than at training
    git(editable, "commit", "-qam", "scale")
    committed = environment_info().local_packages["featurepipe"]
    assert committed.dirty is False and committed.commit != old.commit and committed.tree_digest == new.tree_digest
    assert "local_packages.featurepipe.commit" in environment_drift(before, environment_info()).fields


def test_a_local_non_editable_install_is_pinned_by_its_installed_files(tmp_path, monkeypatch):
    site = tmp_path / "site"
    source = tmp_path / "gone"  # the folder it was installed from no longer exists
    _dist_info(site, "vendored", "0.3", {"url": source.as_uri(), "dir_info": {}}, {"vendored/__init__.py": b"A = 1\n"})
    monkeypatch.syspath_prepend(str(site))
    pkg = local_packages()["vendored"]
    assert not pkg.editable and pkg.commit is None and pkg.files == 1 and pkg.tree_digest.startswith("sha256:")
    # a missing editable source is recorded as data, not raised
    _dist_info(site, "lost", "1.0", {"url": (tmp_path / "nowhere").as_uri(), "dir_info": {"editable": True}})
    lost = local_packages()["lost"]
    assert lost.tree_digest is None and "does not exist" in lost.error
