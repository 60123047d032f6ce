"""Every shell and Python block of the getting-started and how-to pages runs, so the pages cannot drift from the code
(issue 44, acceptance 1). The markers are described in tests/docs/blocks.py.

Each page runs in a fresh folder (pages naming one ``sandbox`` share it, in the site's order: the tabular page trains
the model the calibration and evidence-pack pages use), on the embedded default: a temporary ``HOME``, no
``REPRO_*``, ``MLFLOW_*`` or ``AIRFLOW_*`` variable from outside, this checkout's ``.venv`` first on ``PATH`` (where
``repro-audit`` and ``python`` are), HTTP(S) proxies pointed at a closed port on 127.0.0.1 and MLflow's telemetry off,
so nothing reaches past loopback. A block that does not run here is a skipped test of its own, with its reason; a
``covered-by`` naming a test that does not exist fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, Block, Page, covered_test_exists, parse, run_pages

pytestmark = pytest.mark.slow

PAGES = run_pages()
PARSED = {name: parse(name) for name in PAGES}
#: a block may take this long (a training and an audit on 2 busy cores take about a minute)
BLOCK_TIMEOUT_S = 600


def _environment(home: Path) -> dict[str, str]:
    drop = ("REPRO_", "MLFLOW_", "AIRFLOW_", "AWS_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens, so a request past loopback fails at once
    env.update({
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
        "HTTP_PROXY": closed, "HTTPS_PROXY": closed, "http_proxy": closed, "https_proxy": closed,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true",
        "GIT_AUTHOR_NAME": "Docs Test", "GIT_AUTHOR_EMAIL": "docs@example.invalid",
        "GIT_COMMITTER_NAME": "Docs Test", "GIT_COMMITTER_EMAIL": "docs@example.invalid",
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"), "GIT_CONFIG_NOSYSTEM": "1",
    })
    return env


class Sandbox:
    """One folder a chain of pages runs in, and which of them ran."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.folder = root / "project"
        self.home.mkdir(parents=True)
        self.folder.mkdir()
        (self.home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
        self.env = _environment(self.home)
        self.ran: list[str] = []
        self.failed: str | None = None


@pytest.fixture(scope="module")
def sandboxes(tmp_path_factory) -> dict[str, Sandbox]:
    made: dict[str, Sandbox] = {}
    yield made


def _sandbox(sandboxes: dict[str, Sandbox], name: str, tmp_path_factory) -> Sandbox:
    if name not in sandboxes:
        sandboxes[name] = Sandbox(tmp_path_factory.mktemp("docs-" + name.replace("/", "-").replace(":", "-")))
    return sandboxes[name]


def _run(block: Block, box: Sandbox) -> str:
    """Run (or write) one block in the sandbox; the failure message names the block, its text and what it printed."""
    if "file" in block.markers:
        target = box.folder / block.markers["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text, encoding="utf-8")
        return f"{block.where}: wrote {block.markers['file']}"
    if block.language == "python":
        argv, stdin = [sys.executable, "-"], block.text
    else:
        argv, stdin = ["bash", "-e", "-o", "pipefail", "-c", block.command], None
    started = time.monotonic()
    done = subprocess.run(argv, cwd=box.folder, env=box.env, input=stdin, capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT_S, check=False)
    printed = done.stdout + done.stderr
    expected = int(block.markers.get("exit", "0"))
    problem = None
    if done.returncode != expected:
        problem = f"exited {done.returncode}, the page says {expected}"
    elif "expect" in block.markers and block.markers["expect"] not in printed:
        problem = f"did not print {block.markers['expect']!r}"
    if problem:
        pytest.fail(f"{block.where} ({block.language}) {problem}:\n{block.text}\n--- it printed:\n{printed[-6000:]}",
                    pytrace=False)
    return f"{block.where}: {block.first_line[:70]} ({time.monotonic() - started:.1f} s)"


def _run_page(page: Page, box: Sandbox) -> list[str]:
    said = []
    for command in page.setup:
        done = subprocess.run(["bash", "-e", "-c", command], cwd=box.folder, env=box.env, capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT_S, check=False)
        assert done.returncode == 0, f"docs/{page.name}: setup {command!r} failed:\n{done.stdout}{done.stderr}"
    for block in page.blocks:
        if block.runs:
            said.append(_run(block, box))
    return said


@pytest.mark.parametrize("name", PAGES)
def test_the_pages_blocks_run_as_written(name, sandboxes, tmp_path_factory):
    page = PARSED[name]
    box = _sandbox(sandboxes, page.sandbox, tmp_path_factory)
    if box.failed:
        pytest.fail(f"docs/{name} runs after docs/{box.failed} in the sandbox {page.sandbox!r}, which failed", pytrace=False)
    # a page run alone first runs the pages before it in its sandbox, as the site orders them
    chain = [p for p in PAGES if PARSED[p].sandbox == page.sandbox]
    for earlier in chain[: chain.index(name)]:
        if earlier not in box.ran:
            try:
                _run_page(PARSED[earlier], box)
            except BaseException:
                box.failed = earlier
                raise
            box.ran.append(earlier)
    started = time.monotonic()
    try:
        said = _run_page(page, box)
    except BaseException:
        box.failed = name
        raise
    box.ran.append(name)
    print(f"docs/{name}: {len(said)} block(s) in {time.monotonic() - started:.1f} s", *said, sep="\n  ")


NOT_RUN = [b for name in PAGES for b in PARSED[name].blocks
           if b.language in {"bash", "sh", "shell", "console", "python"} and not b.runs]


@pytest.mark.parametrize("block", NOT_RUN, ids=[f"{b.page}:{b.line}" for b in NOT_RUN])
def test_a_block_that_does_not_run_here_says_why(block):
    """Reported as a skip with its reason: never a block left out silently."""
    if "covered-by" in block.markers:
        wrong = covered_test_exists(block.markers["covered-by"])
        assert wrong is None, f"{block.where}: covered-by {wrong}"
        pytest.skip(f"{block.where} ({block.language}) `{block.first_line[:60]}`: covered by {block.markers['covered-by']}")
    pytest.skip(f"{block.where} ({block.language}) `{block.first_line[:60]}`: {block.markers['skip']}")


def test_the_run_sections_are_the_getting_started_and_how_to_pages():
    assert PAGES[:3] == ["getting-started/demo.md", "getting-started/pytorch.md", "getting-started/tabular.md"]
    assert {p.split("/")[0] for p in PAGES} >= {"getting-started", "how-to"}
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for folder in ("getting-started", "how-to")
               for p in (ROOT / "docs" / folder).glob("*.md")}
    assert on_disk <= set(PAGES), f"pages on disk the nav leaves out (so their blocks would never run): {on_disk - set(PAGES)}"
    runnable = [b for name in PAGES for b in PARSED[name].blocks if b.runs and b.language in {"bash", "python"}]
    assert len(runnable) >= 8, "the docs test runs almost nothing: check the markers"
