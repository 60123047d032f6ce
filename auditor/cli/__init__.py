"""``repro-audit``: argument parsing, progress and exit codes; nothing else.

Each verb lives in a small module that calls one function of the library
(``auditor.pipeline`` and friends). Exceptions become exit codes here and only
here, through the one table in ``auditor.errors`` (``exit_code``): 0 success or
reproduced, 1 findings or not reproduced, 2 bad input or usage, 3 infrastructure error.
"""

from __future__ import annotations

import importlib
import sys

import typer

from auditor.errors import ReproError, exit_code

app = typer.Typer(
    name="repro-audit",
    help="Audit the reproducibility of registered ML models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module registers its commands on ``app`` when imported.
_COMMAND_MODULES = ("lineage", "lineage_show", "snapshot", "models", "evidence", "demo")


def _load_commands() -> None:
    for name in _COMMAND_MODULES:
        try:
            importlib.import_module(f"auditor.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"auditor.cli.{name}":
                raise


def _version(value: bool) -> None:
    if value:
        from auditor import __version__

        typer.echo(f"repro-audit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version and exit"),
) -> None:
    """Audit the reproducibility of registered ML models."""


def _click_errors() -> tuple[type[BaseException], ...]:
    """The usage-error classes of the click the installed typer raises (typer 0.29 vendors its own)."""
    import click

    found: list[type[BaseException]] = [click.ClickException]
    try:
        from typer._click.exceptions import ClickException as Vendored  # typer >= 0.29
    except ImportError:
        pass
    else:
        found.append(Vendored)
    return tuple(found)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from auditor.cli.output import redacting

    _load_commands()
    # every byte the CLI prints passes the redactor, whoever prints it (rich, click, a traceback)
    sys.stdout, sys.stderr = redacting(sys.stdout), redacting(sys.stderr)
    try:
        _run(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _run(argv: list[str] | None) -> None:
    try:
        # without standalone mode click returns a typer.Exit's code instead of exiting
        code = app(args=argv, standalone_mode=False)
    except ReproError as exc:
        from auditor.cli.output import error

        error(str(exc))
        sys.exit(exit_code(exc))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(130)
    except _click_errors() as exc:  # usage errors: a usage line, exit 2, never a traceback
        exc.show()
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
