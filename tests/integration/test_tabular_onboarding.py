"""Acceptance (issue 28, point 5): the README's "Audit your own scikit-learn / XGBoost / LightGBM / CatBoost
script", followed literally, reaches REPRODUCED_BITWISE, with the predictions scored as evidence.

The README's script and commands are read from the README itself, never copied here, so the section and this
test cannot drift apart. Everything is real: a git repository holding the script and the README's
``.gitignore``, MLflow on the default SQLite file, the default snapshot store, XGBoost training, and an audit
by the CLI (``repro-audit audit``, run as ``python -m auditor``) whose verdict is read. The project's
interpreter is the PyTorch onboarding test's (a venv over the auditor's packages with this checkout on its
path: what ``pip install -e`` makes).
"""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from tests.fixtures.gitrepo import git, init_repo
from tests.integration.test_onboarding import ROOT, _clean_env, project_python, readme_block  # noqa: F401

pytest.importorskip("xgboost")

SECTION = (ROOT / "docs" / "getting-started" / "tabular.md").read_text(encoding="utf-8")  # was the README's section


def section_block(language: str, after: str) -> str:
    """The first ```language block of the tabular section after the text ``after``."""
    import re
    import textwrap

    start = SECTION.index(after)
    match = re.search(rf"```{language}\n(.*?)```", SECTION[start:], re.S)
    assert match, f"no ```{language} block after {after!r} in the README's tabular section"
    return textwrap.dedent(match.group(1))


def test_the_readme_tabular_section_followed_literally_reaches_reproduced_bitwise(project_python, tmp_path):  # noqa: F811
    script = section_block("python", "Save the fitted model")
    assert "run.save_model(model, eval_data=" in script and "auditor.register_model(run" in script
    # the previous section's steps hold unchanged: its .gitignore (README step 2)
    gitignore = readme_block("gitignore", "Keep the auditor's files")
    project = init_repo(tmp_path / "credit", {"train.py": script, ".gitignore": gitignore})

    commands = [line.split("#")[0].strip() for line in section_block("bash", "Train, then audit").splitlines()]
    train_cmd, audit_cmd = [shlex.split(c) for c in commands if c]
    assert train_cmd == ["python", "train.py"] and audit_cmd[:2] == ["repro-audit", "audit"]

    trained = subprocess.run([str(project_python), *train_cmd[1:]], cwd=project, env=_clean_env(),
                             capture_output=True, text=True, timeout=900, check=False)
    assert trained.returncode == 0, trained.stderr[-4000:]
    assert git(project, "status", "--porcelain", "--untracked-files=all").strip() == ""  # .gitignore kept it clean

    audited = subprocess.run([str(project_python), "-m", "auditor", *audit_cmd[1:], "--json"], cwd=project,
                             env=_clean_env(), capture_output=True, text=True, timeout=900, check=False)
    assert audited.stdout.strip(), audited.stderr[-4000:]
    result = json.loads(audited.stdout)
    tiers = result["result"]["tiers"]
    assert result["verdict"] == "REPRODUCED_BITWISE", (result["verdict"], {k: v["summary"] for k, v in tiers.items()},
                                                       result["result"]["findings"], result["result"].get("log_tail", "")[-3000:])
    assert audited.returncode == 0

    # what the README promises: the flavour, its knobs, the evaluation data and threshold recorded; both models
    # scored in the rebuild, no decision flipped
    artifact = next(a for a in result["result"]["record"]["outputs"]["artifacts"] if a.get("flavor"))
    assert artifact["flavor"] == "xgboost" and artifact["knobs"]["tree_method"]
    assert artifact["predictions"]["rows"] == 500 and artifact["predictions"]["threshold"] == 0.5
    evidence = result["result"]["evidence"]
    assert evidence["predictions"].startswith("500 rows") and evidence["predictions.decision_flip_rate"] == "0.0"
    flips = next(m for m in result["result"]["metrics"] if m["name"] == "decision_flip_rate")
    assert flips["inside"] is True and flips["band"]["upper"] == 0.0
