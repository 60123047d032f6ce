"""Each ``REPRO_*`` variable name and each ``repro.*`` tag name is spelled in exactly one module of auditor/.

Issue 12, acceptance 2: the contract's variables live in ``auditor.contract``, the tag and artifact
names in ``auditor.tags``, the settings' variables in ``auditor.settings``; every other module imports
them. This walks every module with ``ast`` and counts string constants that are exactly such a name
(docstrings are prose, not spellings, and are skipped; so are longer strings that merely mention one).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

import auditor

PACKAGE = Path(auditor.__file__).resolve().parent
VARIABLE = re.compile(r"^REPRO_[A-Z0-9_]+$")
TAG = re.compile(r"^repro\.[a-z_]+(\.[a-z_]+)*$")  # schema ids such as repro.bands/1 do not match


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def spellings() -> dict[str, set[str]]:
    """Name -> the modules (paths relative to auditor/) holding it as a string literal."""
    where: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                if VARIABLE.match(node.value) or TAG.match(node.value):
                    where[node.value].add(path.relative_to(PACKAGE).as_posix())
    return where


#: a name inside longer text: an error's hint, a help line ("set REPRO_REPORTS to …"); schema ids
#: (repro.bands/1) and file names that merely contain a tag's words are not tag names
MENTION = re.compile(r"(?<![A-Za-z0-9_.])(REPRO_[A-Z0-9_]*[A-Z0-9_]|repro\.[a-z_]+(?:\.[a-z_]+)*)(?![A-Za-z0-9_/.])")
def mentions() -> dict[str, set[str]]:
    """Name -> the modules whose strings (docstrings aside) mention it anywhere, in a longer text too."""
    where: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                for name in MENTION.findall(node.value):
                    where[name].add(rel)
    for path in sorted(PACKAGE.rglob("*.j2")):  # the report templates print names too (render.py passes them in)
        for name in MENTION.findall(path.read_text(encoding="utf-8")):
            where[name].add(path.relative_to(PACKAGE).as_posix())
    return where


def test_the_walk_finds_the_contract_and_the_tags_in_their_homes():
    where = spellings()
    assert where["REPRO_OUTPUT_DIR"] >= {"contract.py"}
    assert where["REPRO_DATA_"] >= {"contract.py"}
    assert where["repro.record_digest"] >= {"tags.py"}
    assert where["repro.audit.report"] >= {"tags.py"}


def test_every_variable_and_tag_name_is_spelled_in_exactly_one_module():
    repeated = {name: sorted(modules) for name, modules in spellings().items() if len(modules) > 1}
    assert not repeated, "spelled in more than one module (import it from its home instead):\n" + "\n".join(
        f"  {name}: {', '.join(modules)}" for name, modules in sorted(repeated.items())
    )


def test_messages_and_help_name_a_variable_or_tag_through_its_home():
    """A hint that says "set REPRO_REPORTS to …" writes ``{REPORTS.name}``: a rename then reaches every message."""
    assert MENTION.findall("set REPRO_SIGNING_KEY to a key; tag repro.audit.report; schema repro.bands/1") == [
        "REPRO_SIGNING_KEY", "repro.audit.report"]
    spelled = {name: modules for name, modules in mentions().items() if len(modules) > 1}
    assert not spelled, "mentioned in more than one module (interpolate its home's name instead):\n" + "\n".join(
        f"  {name}: {', '.join(sorted(modules))}" for name, modules in sorted(spelled.items())
    )


# -- the grammars (issue 25, build point 3): each has one home, and the walk below fails a second one --------
VERDICT_NAMES = {"REPRODUCED_BITWISE", "REPRODUCED_WITHIN_TOLERANCE", "OUT_OF_TOLERANCE", "NOT_REPRODUCIBLE", "ERROR"}
_HEX64 = "[0-9a-f]{64}"


def _strings(tree: ast.Module):
    """Every string constant of a module but its docstrings (an f-string's literal parts included)."""
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.value


def _runs_git(node: ast.AST) -> bool:
    """``["git", …]`` (an argv) or ``which("git")``."""
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        first = node.elts[0]
        return isinstance(first, ast.Constant) and first.value == "git"
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "git":
        return ast.unparse(node.func).endswith("which")
    return False


def _hashes_a_file(tree: ast.Module) -> bool:
    """A function that reads a file and hashes it with SHA-256 (file hashing is ``auditor.digests.sha256_file``; a
    format's own checksum, such as DVC's MD5, is that format's)."""
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        calls = [ast.unparse(n.func) for n in ast.walk(func) if isinstance(n, ast.Call)]
        hashes = any(c.startswith(("hashlib.sha256", "hashlib.file_digest")) for c in calls)
        reads = any(c == "open" or c.endswith(".read_bytes") for c in calls)
        if hashes and reads:
            return True
    return False


#: rule name -> (what a module does that only the home may do, the home)
GRAMMARS = {
    "verdict names": (lambda tree: any(s in VERDICT_NAMES for s in _strings(tree)), {"outcomes.py"}),
    "models:/ and runs:/ grammar": (lambda tree: any(s.startswith(("models:/", "runs:/")) for s in _strings(tree)), {"uris.py"}),
    "the sha256: spelling": (lambda tree: any(s == "sha256:" or s.startswith(("sha256:[", "^sha256:")) for s in _strings(tree)),
                             {"digests.py"}),
    "file hashing": (lambda tree: "file_digest" in ast.unparse(tree) or _hashes_a_file(tree), {"digests.py"}),
    "the snapshot-id and digest grammars": (lambda tree: any(_HEX64 in s for s in _strings(tree)), {"digests.py", "snapshots/manifest.py"}),
    "running git": (lambda tree: any(_runs_git(n) for n in ast.walk(tree)), {"git.py"}),
}


def grammar_homes(rule: str, package: Path = PACKAGE) -> set[str]:
    """The modules (paths relative to ``package``) that do what ``rule`` keeps to one home."""
    found, _ = GRAMMARS[rule]
    return {p.relative_to(package).as_posix() for p in sorted(package.rglob("*.py"))
            if found(ast.parse(p.read_text(encoding="utf-8"), filename=str(p)))}


@pytest.mark.parametrize("rule", sorted(GRAMMARS))
def test_each_grammar_is_written_in_its_home_only(rule):
    homes = GRAMMARS[rule][1]
    written = grammar_homes(rule)
    assert written - homes == set(), f"{rule} is written outside its home {sorted(homes)}: {sorted(written - homes)}"
    assert written & homes, f"the walk no longer finds {rule} in its home {sorted(homes)}"


SECOND_HOMES = {
    "verdict names": 'STYLE = {"NOT_REPRODUCIBLE": "red"}\n',
    "models:/ and runs:/ grammar": 'def ref(name, version):\n    return f"models:/{name}/{version}"\n',
    "the sha256: spelling": 'def spelled(h):\n    return "sha256:" + h\n',
    "file hashing": 'import hashlib\n\ndef digest(path):\n    with open(path, "rb") as f:\n        return hashlib.sha256(f.read()).hexdigest()\n',
    "the snapshot-id and digest grammars": 'import re\nID = re.compile(r"blake3:[0-9a-f]{64}")\n',
    "running git": 'import subprocess\n\ndef head(repo):\n    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo)\n',
}


@pytest.mark.parametrize("rule", sorted(GRAMMARS))
def test_a_grammar_written_a_second_time_is_found(rule, tmp_path):
    """The walk can fail: a module that writes the grammar again, outside its home, is named."""
    (tmp_path / "elsewhere.py").write_text(SECOND_HOMES[rule])
    assert grammar_homes(rule, tmp_path) == {"elsewhere.py"}
