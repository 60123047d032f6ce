"""The README is the front door (issue 44, build 1): one screen or two, and what it shows stays true.

Its taste of the SDK is made of lines of the tabular getting-started page's script (which tests/docs runs), its
verdict table holds every verdict with the exit code ``auditor.outcomes`` gives it, and every link into the site
names a page that exists.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.blocks import parse

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.M | re.S)


def test_the_readme_fits_on_a_screen_or_two():
    lines = README.splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines: move what the site says better into docs/"
    long = [n for n, line in enumerate(lines, 1) if len(line) > 120]
    assert not long, f"README.md lines over 120 characters: {long}"


def test_the_taste_of_the_sdk_is_the_tabular_pages_script_and_command():
    page = parse("getting-started/tabular.md")
    script = next(b.text for b in page.blocks if b.markers.get("file") == "train.py")
    commands = "".join(b.text for b in page.blocks if b.language == "bash")
    (taste,) = _blocks("python")
    for line in taste.splitlines():
        assert line in script.splitlines(), f"the README's SDK line is not in the tabular page's script: {line!r}"
    shell = _blocks("bash")[1]
    for line in shell.splitlines():
        assert line in commands.splitlines(), f"the README's command is not the tabular page's: {line!r}"


def test_the_verdict_table_has_every_verdict_with_its_exit_code():
    from auditor.outcomes import VERDICTS

    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| (\d) \|", README, re.M))
    assert rows == {verdict.value: str(meaning.exit_code) for verdict, meaning in VERDICTS.items()}


def test_every_link_into_the_docs_names_a_file_that_exists():
    links = re.findall(r"\]\(((?:docs|dags|docker)/[^)#\s]+)", README)
    assert links, "the README links nothing in the site"
    missing = sorted({link for link in links if not (ROOT / link).exists()})
    assert not missing, f"README.md links files that do not exist: {missing}"
