"""The code blocks of the documentation site's pages, and the markers that say how a test treats each.

A page of the getting-started and how-to sections (``mkdocs.yml``'s nav) runs its blocks in order. A marker is an HTML
comment, which the site does not show:

- above a block (only comment lines between the marker and the fence):
  ``<!-- docs-test: skip: REASON -->`` the block cannot run here, and why;
  ``<!-- docs-test: covered-by: tests/FILE.py::TEST -->`` another test runs what the block does (it must exist);
  ``<!-- docs-test: file: NAME -->`` the block is a file the page's reader writes: the test writes it, runs nothing;
  ``<!-- docs-test: exit: N -->`` the block ends with exit status N (default 0);
  ``<!-- docs-test: expect: TEXT -->`` what it prints (stdout or stderr) holds TEXT;
- anywhere on a page:
  ``<!-- docs-test: sandbox: NAME -->`` the pages naming one sandbox share one folder, in the site's order;
  ``<!-- docs-test: setup: COMMAND -->`` a shell command run in that folder before the page's first block.

``bash``, ``sh``, ``shell`` and ``console`` blocks are shell (a ``console`` block's commands are its ``$ `` lines),
``python`` blocks Python; a block in any other language (``gitignore``, ``diff``, ``text``, ``json``) is not run, unless
a ``file:`` marker writes it.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: the nav sections whose pages' blocks are run
RUN_SECTIONS = ("Getting started", "How-to guides")
SHELL = {"bash", "sh", "shell", "console"}
RUN = SHELL | {"python"}
BLOCK_KEYS = {"skip", "covered-by", "file", "exit", "expect"}
PAGE_KEYS = {"sandbox", "setup"}

MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*([a-z-]+)\s*(?::\s*(.*?))?\s*-->\s*$")
OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)[^`]*$")


class MarkerError(ValueError):
    """A marker the test does not understand, or one with nothing to apply to."""


@dataclass
class Block:
    page: str
    line: int  # 1-based, of the opening fence
    language: str
    text: str
    markers: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        """Run (or written, for a ``file:``) by the page's test; else reported with its skip or covered-by reason."""
        if "skip" in self.markers or "covered-by" in self.markers:
            return False
        return self.language in RUN or "file" in self.markers

    @property
    def command(self) -> str:
        """The shell text of a ``console`` block (its ``$ `` lines), else the block's text."""
        if self.language != "console":
            return self.text
        return "\n".join(line[2:] for line in self.text.splitlines() if line.startswith("$ "))

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")


@dataclass
class Page:
    name: str  # relative to docs/
    blocks: list[Block]
    sandbox: str
    setup: list[str]


def run_pages(mkdocs: Path = ROOT / "mkdocs.yml") -> list[str]:
    """The pages of the getting-started and how-to sections, in the site's order."""
    config = yaml.load(mkdocs.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)

    def pages(entry) -> list[str]:
        if isinstance(entry, str):
            return [entry]
        if isinstance(entry, list):
            return [p for item in entry for p in pages(item)]
        if isinstance(entry, dict):
            return [p for value in entry.values() for p in pages(value)]
        return []

    found = []
    for section in config["nav"]:
        if isinstance(section, dict) and next(iter(section)) in RUN_SECTIONS:
            found += pages(section)
    return found


def parse(name: str, text: str | None = None) -> Page:
    """A page's blocks with their markers, its sandbox (the page's own unless it names one) and setup commands."""
    lines = (text if text is not None else (DOCS / name).read_text(encoding="utf-8")).splitlines()
    blocks: list[Block] = []
    page_markers: dict[str, list[str]] = {"sandbox": [], "setup": []}
    pending: dict[str, str] = {}
    pending_line = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = MARKER.match(line)
        if marker:
            key, value = marker.group(1), (marker.group(2) or "").strip()
            if key in PAGE_KEYS:
                if not value:
                    raise MarkerError(f"docs/{name}:{i + 1}: docs-test {key} needs a value")
                page_markers[key].append(value)
            elif key in BLOCK_KEYS:
                if key in pending:
                    raise MarkerError(f"docs/{name}:{i + 1}: docs-test {key} given twice for one block")
                if not value:
                    raise MarkerError(f"docs/{name}:{i + 1}: docs-test {key} needs a value (a skip needs its reason)")
                pending[key] = value
                pending_line = pending_line or i + 1
            else:
                raise MarkerError(f"docs/{name}:{i + 1}: unknown docs-test marker {key!r} (known: "
                                  f"{', '.join(sorted(BLOCK_KEYS | PAGE_KEYS))})")
            i += 1
            continue
        opened = OPEN.match(line)
        if opened:
            fence, language = opened.group(2), opened.group(3).lower()
            body: list[str] = []
            start = i + 1  # the opening fence's line number
            i += 1
            while i < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[i]):
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise MarkerError(f"docs/{name}:{len(lines)}: a code block opened and never closed")
            blocks.append(Block(name, start, language, textwrap.dedent("\n".join(body)) + "\n", pending))
            pending, pending_line = {}, 0
            i += 1
            continue
        if pending and line.strip():
            raise MarkerError(f"docs/{name}:{pending_line}: docs-test marker(s) {sorted(pending)} are not just above a "
                              "code block")
        i += 1
    if pending:
        raise MarkerError(f"docs/{name}:{pending_line}: docs-test marker(s) {sorted(pending)} with no code block after")
    if len(page_markers["sandbox"]) > 1:
        raise MarkerError(f"docs/{name}: more than one docs-test sandbox")
    for block in blocks:
        both = {"skip", "covered-by"} & set(block.markers)
        if len(both) == 2 or both and {"file", "exit", "expect"} & set(block.markers):
            raise MarkerError(f"{block.where}: a block is skipped, covered by another test, or run: not two of them")
        if "exit" in block.markers and not block.markers["exit"].isdigit():
            raise MarkerError(f"{block.where}: docs-test exit takes a number")
    sandbox = page_markers["sandbox"][0] if page_markers["sandbox"] else f"page:{name}"
    return Page(name, blocks, sandbox, page_markers["setup"])


def covered_test_exists(reference: str, root: Path = ROOT) -> str | None:
    """None when ``tests/FILE.py::TEST`` names a test function that exists; else what is wrong with it."""
    path, sep, test = reference.partition("::")
    if not sep or not path.startswith("tests/") or not path.endswith(".py") or not test.isidentifier():
        return f"{reference!r} is not tests/FILE.py::TEST_NAME"
    file = root / path
    if not file.is_file():
        return f"{path} does not exist"
    if not re.search(rf"^(?:async )?def {re.escape(test)}\(", file.read_text(encoding="utf-8"), re.M):
        return f"{path} defines no test {test}"
    return None
