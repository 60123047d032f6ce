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
