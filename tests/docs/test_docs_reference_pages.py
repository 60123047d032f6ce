"""The generated pages are what the code gives now (issue 44, acceptance 2): the CLI from its click tree, the settings
from the live catalog (``auditor.settings.SETTINGS``), the exit codes from their one table, the regulatory map.

A setting added without its page entry, or a page naming a setting the catalog does not hold, fails here; the fix is
``make docs-reference`` (``docs/gen_reference.py``) and committing the pages it writes.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
_spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
gen_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_reference)

FIX = "run `make docs-reference` and commit the pages it writes"
#: a table row's first cell: a variable name in backticks
ROW = re.compile(r"^\| `((?:REPRO|MLFLOW)_[A-Z0-9_]+)` \|", re.M)


@pytest.mark.parametrize("page", sorted(gen_reference.PAGES))
def test_each_generated_page_is_what_the_code_gives_now(page):
    committed = (DOCS / page).read_text(encoding="utf-8")
    assert committed == gen_reference.PAGES[page](), f"docs/{page} is stale: {FIX}"


def test_the_settings_page_names_every_setting_of_the_catalog_and_no_other():
    from auditor.settings import SETTINGS

    catalog = {s.name for s in SETTINGS}
    listed = ROW.findall((DOCS / "reference" / "settings.md").read_text(encoding="utf-8"))
    assert len(listed) == len(set(listed)), f"listed twice: {sorted({n for n in listed if listed.count(n) > 1})}"
    missing, unknown = sorted(catalog - set(listed)), sorted(set(listed) - catalog)
    assert not missing, f"settings without an entry on docs/reference/settings.md: {missing}: {FIX}"
    assert not unknown, f"docs/reference/settings.md names settings the catalog does not hold: {unknown}: {FIX}"


def test_the_cli_page_has_every_command_and_every_option():
    from auditor.cli import _load_commands, command

    _load_commands()
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    for path, cmd, context in gen_reference._commands(command(), "repro-audit"):
        section = page.split(f"\n## {path}\n", 1)
        assert len(section) == 2, f"docs/reference/cli.md has no section for {path}: {FIX}"
        body = section[1].split("\n## ", 1)[0]
        for param in cmd.get_params(context):
            if param.param_type_name == "option" and not param.hidden:
                assert f"`{param.opts[0]}" in body, f"{path} {param.opts[0]} is not on docs/reference/cli.md: {FIX}"


def test_check_says_which_page_is_stale(tmp_path):
    for name, page in gen_reference.PAGES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(page(), encoding="utf-8")
    assert gen_reference.stale(tmp_path) == []
    (tmp_path / "reference" / "settings.md").write_text("# Settings\n", encoding="utf-8")
    assert gen_reference.stale(tmp_path) == ["reference/settings.md"]
