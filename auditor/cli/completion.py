"""``repro-audit completion SHELL``: print the shell's completion script (``--install-completion`` installs it).

The same script typer's ``--show-completion`` prints, but for a named shell, so it works where the
shell cannot be detected (a Dockerfile, a CI step): ``repro-audit completion bash > /etc/bash_completion.d/repro-audit``.
"""

from __future__ import annotations

from enum import StrEnum

import typer

from auditor.cli import app

PROG = "repro-audit"
COMPLETE_VAR = "_REPRO_AUDIT_COMPLETE"


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"
    powershell = "powershell"


@app.command("completion")
def completion_cmd(shell: Shell = typer.Argument(..., help="bash, zsh, fish or powershell")) -> None:
    """Print the completion script for SHELL (source it, or save it where your shell loads completions)."""
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell.value))
