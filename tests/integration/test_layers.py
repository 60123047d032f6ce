"""The layering is enforced by a tool, not by hope (import-linter contract in pyproject.toml)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_pure_core_imports_no_io_library():
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists() and shutil.which("lint-imports") is None:
        if os.environ.get("CI"):
            pytest.fail("import-linter is not installed, and CI installs it (.[dev]): the layers went unchecked")
        pytest.skip("import-linter is not installed (pip install -e .[dev])")
    result = subprocess.run([str(lint if lint.exists() else "lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout


def test_importing_the_package_and_the_cli_pulls_in_no_heavy_library():
    code = "import sys, auditor, auditor.cli, auditor.steps, auditor.lineage.gate; auditor.cli._load_commands(); print(sorted(m for m in ('torch', 'mlflow', 'boto3', 'docker', 'airflow') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_no_module_imports_a_module_that_imports_it_back():
    grimp = pytest.importorskip("grimp") if not os.environ.get("CI") else __import__("grimp")
    graph = grimp.build_graph("auditor")
    circles = sorted(
        (module, imported)
        for module in graph.modules
        for imported in graph.find_modules_directly_imported_by(module)
        if imported != module and module < imported and graph.chain_exists(importer=imported, imported=module)
    )
    assert circles == []
