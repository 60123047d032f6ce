"""argparse as a config source: each value's source (default, cli, env) told truthfully, stable spellings."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from auditor.errors import BadInput
from auditor.lineage.gather import ArgparseSource, argparse_config, resolve_config


def parser(env: dict[str, str] | None = None) -> argparse.ArgumentParser:
    env = env or {}
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=float(env.get("MYJOB_LR", "0.1")))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--out", type=Path, default=Path("runs/x"))
    p.add_argument("--tag", action="append", default=[])
    p.add_argument("data", nargs="?", default="train.csv")
    p.set_defaults(func=parser)
    return p


def test_values_from_the_command_line_read_cli_even_when_they_equal_the_default():
    values, sources = argparse_config(parser(), argv=["--epochs", "3", "--batch-size=32", "--dry-run", "x.csv"], env={})
    assert values["epochs"] == 3 and values["batch_size"] == 32 and values["dry_run"] is True and values["data"] == "x.csv"
    assert sources["epochs"] == "cli"  # equal to the default, but given: argv decides, not the value
    assert sources["batch_size"] == "cli" and sources["dry_run"] == "cli" and sources["data"] == "cli"
    assert sources["lr"] == "default" and sources["out"] == "default" and sources["tag"] == "default"


def test_abbreviated_and_appended_options_are_cli():
    _, sources = argparse_config(parser(), argv=["--batch", "8", "--tag", "a", "--tag", "b"], env={})
    assert sources["batch_size"] == "cli" and sources["tag"] == "cli"


def test_a_default_taken_from_an_environment_variable_reads_env():
    env = {"MYJOB_LR": "0.5"}
    values, sources = argparse_config(parser(env), argv=[], env=env)
    assert values["lr"] == 0.5 and sources["lr"] == "env"
    # the same variable does not make a command-line value "env", nor another value
    assert argparse_config(parser(env), argv=["--lr", "0.5"], env=env)[1]["lr"] == "cli"
    assert argparse_config(parser(), argv=[], env={"MYJOB_LR": "0.5"})[1]["lr"] == "default"


def test_non_json_values_get_stable_spellings_without_memory_addresses():
    values, _ = argparse_config(parser(), argv=[], env={})
    assert values["out"] == "runs/x"
    assert values["func"] == f"{__name__}.parser"
    assert "0x" not in repr(values)


def test_the_parser_is_left_as_it_was():
    p = parser()
    argparse_config(p, argv=["--epochs", "9"], env={})
    assert p.parse_args([]).epochs == 3 and p.parse_args([]).out == Path("runs/x") and p.get_default("func") is parser


def test_a_parsed_namespace_with_its_parser_and_without():
    p = parser()
    args = p.parse_args(["--lr", "0.3"])
    with_parser = resolve_config(ArgparseSource(args, p, ("--lr", "0.3")), env={})
    assert with_parser.resolved["lr"] == 0.3 and with_parser.sources["lr"] == "cli" and with_parser.sources["epochs"] == "default"
    # without the parser only the option's spelling in argv tells (documented): still right for --opt value
    alone = resolve_config(ArgparseSource(args, None, ("--lr", "0.3")), env={})
    assert alone.sources["lr"] == "cli" and alone.sources["batch_size"] == "default"


def test_subcommands_are_read_through_their_own_parsers():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command")
    fit = sub.add_parser("fit")
    fit.add_argument("--lr", type=float, default=0.1)
    fit.add_argument("--epochs", type=int, default=2)
    values, sources = argparse_config(p, argv=["fit", "--lr", "0.2"], env={})
    assert values == {"command": "fit", "lr": 0.2, "epochs": 2}
    assert sources == {"command": "cli", "lr": "cli", "epochs": "default"}


def test_a_command_line_the_parser_refuses_is_bad_input_and_prints_nothing(capsys):
    with pytest.raises(BadInput, match="does not parse"):
        argparse_config(parser(), argv=["--epochs", "many"], env={})
    assert capsys.readouterr().err == ""


def test_key_value_overrides_beside_argparse_are_refused():
    with pytest.raises(BadInput, match="argparse"):
        resolve_config(parser(), ["lr=0.2"], env={})


def test_a_secret_given_on_the_command_line_is_redacted_in_the_record():
    p = argparse.ArgumentParser()
    p.add_argument("--api-key", default=os.environ.get("NEVER_SET_HERE"))
    info = resolve_config(ArgparseSource(p, p, ("--api-key", "sk-live-0123456789abcdef0123456789")), env={})
    assert "sk-live" not in repr(info.resolved) and info.sources["api_key"] == "cli"
