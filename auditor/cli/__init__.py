"""``repro-audit``: argument parsing, progress and exit codes; nothing else.

Each verb lives in a small module that calls one function of the library
(an ``auditor.steps.Session`` each). Exceptions become exit codes here and only
here, through the one table in ``auditor.errors`` (``exit_code``): 0 success or
reproduced, 1 findings or not reproduced, 2 bad input or usage, 3 infrastructure error.

Under ``--json`` an error is also printed on stdout as ``{"error", "exit_code", "hint"}`` (the exit
code is the same). Shell completion: ``repro-audit --install-completion``, or ``repro-audit completion SHELL``.
"""

from __future__ import annotations

import functools
import importlib
import sys
import traceback
from typing import NoReturn

import typer

from auditor.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, ReproError, describe, exit_code, missing_extra

app = typer.Typer(
    name="repro-audit",
    help="Audit the reproducibility of registered ML models.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

# Each module registers its commands on ``app`` when imported.
_COMMAND_MODULES = ("lineage", "lineage_show", "snapshot", "models", "evidence", "pack", "report", "completion", "demo", "compare", "adopt", "retention", "webhook", "config")


def _load_commands() -> None:
    for name in _COMMAND_MODULES:
        try:
            importlib.import_module(f"auditor.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"auditor.cli.{name}":
                raise


def command():
    """The click command tree of ``app``, every parameter shown in ``--help`` as a person types it
    (``auditor.cli.params.plain_help``: ``MODEL_REF``, no ``<bool>``)."""
    from auditor.cli.params import plain_help

    return plain_help(typer.main.get_command(app))


def _version(value: bool) -> None:
    if value:
        from auditor import __version__

        typer.echo(f"repro-audit {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version and exit"),
) -> None:
    """Audit the reproducibility of registered ML models."""


def _click_errors() -> tuple[type[BaseException], ...]:
    """The usage-error classes the installed typer raises: its vendored click (typer >= 0.29, where the core
    install has no ``click`` at all) and, when importable, the standalone click (older typers raise that one)."""
    found: list[type[BaseException]] = []
    try:
        from typer._click.exceptions import ClickException as Vendored  # typer >= 0.29
    except ImportError:
        pass
    else:
        found.append(Vendored)
    try:
        from click import ClickException
    except ImportError:  # the core install: typer 0.29 brings no click
        pass
    else:
        found.append(ClickException)
    return tuple(found)


def _json_requested(argv: list[str] | None) -> bool:
    """Whether the command line asks for ``--json`` (before parsing: a usage error is reported as JSON too)."""
    args = sys.argv[1:] if argv is None else argv
    return "--json" in args[: args.index("--")] if "--" in args else "--json" in args


def error_message(exc: ReproError) -> str:
    """An error's message without the hint its text ends with (``--json`` gives the hint its own field)."""
    text = str(exc)
    suffix = f" ({exc.hint})" if exc.hint else ""
    return text[: -len(suffix)] if suffix and text.endswith(suffix) else text


def _fail(message: str, code: int) -> NoReturn:
    from auditor.cli.output import error

    error(message)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from auditor.cli import output

    output.reset()
    _exit_without_collecting()
    as_json = _json_requested(argv)
    _load_commands()
    # every byte the CLI prints passes the redactor, whoever prints it (rich, click, logging, a traceback)
    sys.stdout, sys.stderr = output.redacting(sys.stdout), output.redacting(sys.stderr)
    output.install_logging()
    try:
        _run(argv, as_json)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


@functools.cache  # once per process
def _exit_without_collecting() -> None:
    """As the process exits, keep CPython's last garbage collections off the heap the command built.

    Finalization collects every object still alive (MLflow's and SQLAlchemy's: 0.4-0.7 s after the last output of an
    audit, measured for issue 41). ``gc.freeze`` at exit takes them out of the collector's reach; modules are still
    cleared and objects released by their counts; only cycles alive at exit are left to the operating system, whose
    finalisers Python never promises to run."""
    import atexit
    import gc

    atexit.register(gc.freeze)


def _run(argv: list[str] | None, as_json: bool) -> None:
    """Run the app; every way it can end becomes an exit code from ``auditor.errors``' one table."""
    try:
        # without standalone mode click returns a typer.Exit's code instead of exiting
        code = command().main(args=argv, standalone_mode=False, prog_name="repro-audit")
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(EXIT_INTERRUPTED)
    except _click_errors() as exc:  # usage errors: a usage line, exit 2, never a traceback
        if as_json:
            from auditor.cli.output import emit_error_json

            ctx = getattr(exc, "ctx", None)
            hint = f"see '{ctx.command_path} --help'" if ctx is not None else "see 'repro-audit --help'"
            emit_error_json(exc.format_message(), EXIT_USAGE, hint)
        exc.show()
        sys.exit(EXIT_USAGE)
    except Exception as raised:  # ours name the fix; anything else is a crash of ours: exit 3, not "not reproduced"
        exc = missing_extra(raised) or raised  # a module of an optional extra missing: name the extra, exit 2
        if not isinstance(exc, ReproError):  # a bug of ours: its traceback (redacted, on stderr) is what a report needs
            traceback.print_exc(file=sys.stderr)
        message = error_message(exc) if isinstance(exc, ReproError) else describe(exc)
        if as_json:
            from auditor.cli.output import emit_error_json

            emit_error_json(message, exit_code(exc), getattr(exc, "hint", None))
        _fail(describe(exc), exit_code(exc))
    sys.exit(code if isinstance(code, int) else EXIT_OK)
