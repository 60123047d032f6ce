"""``repro-audit config show``: every setting as this command would use it, with where its value came from.

The settings layer finds the configuration file and resolves each value (``auditor.settings.explain``); this
only prints. A source is ``environment`` (a variable, which wins), ``file PATH`` (``repro-audit.toml`` or
``[tool.repro-audit]`` in ``pyproject.toml``, found from the working directory upward) or ``default``. A
secret's value is shown as ``***``. A configuration file that cannot be used (an unknown key, a secret, a
malformed value) is an error naming the file and the key: exit 2.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from auditor.cli import app
from auditor.cli.output import console, declare_public, emit_json, table
from auditor.settings import CONFIG_FILE, PYPROJECT

config_app = typer.Typer(help="The settings: which apply here, and where each comes from.", no_args_is_help=True)
app.add_typer(config_app, name="config")

UNSET = "unset"


@config_app.command("show")
def show_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="print {config_file, settings: [{name, file_key, value, source}]} as JSON")] = False,
) -> None:
    """Print each setting's value and its source: environment, file PATH or default (secrets as ***)."""
    from auditor.settings import explain

    path, rows = explain()
    if as_json:
        emit_json({"config_file": str(path) if path else None,
                   "settings": [{"name": r.setting.name, "file_key": r.setting.key, "value": _json(r.shown),
                                 "source": r.source} for r in rows]})
        return
    out = console()
    out.print(f"configuration file: {path}" if path else
              f"configuration file: none ({CONFIG_FILE}, or [tool.repro-audit] in {PYPROJECT}, from here upward)",
              markup=False, highlight=False, soft_wrap=True)
    shown = table("variable", "file key", "value", "source")
    for row in rows:
        value = row.shown if row.setting.secret else row.setting.text(row.value)
        if not row.setting.secret:
            declare_public(value)  # our own label ('key') must not make the redactor take a public value for a secret
        shown.add_row(row.setting.name, row.setting.key, value if value is not None else UNSET, row.source)
    out.print(shown)


def _json(value: Any) -> Any:
    """A value as JSON holds it: a path as text, pairs as an object, a list as a list."""
    if isinstance(value, tuple) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)
