"""How the CLI's tables show a value (``auditor.cli.output``: issue 40, build point 6): words for booleans and missing
values, rounded figures, a visible escape only for what a screen would hide, and tables that fit the terminal
without cutting a word."""

from __future__ import annotations

import io

import pytest

from auditor.cli.output import cell_text, figure, figures, fit_table, table


@pytest.mark.parametrize(("value", "shown"), [
    (1.7532749938964844, "1.753"),
    (0.740234375, "0.7402"),
    (3.2e-06, "3.2e-06"),
    (512.0, "512"),
    (123456.7, "123457"),
    (7, "7"),
    (float("nan"), "nan"),
])
def test_a_figure_is_rounded_to_four_significant_digits(value, shown):
    assert figure(value) == shown


def test_figures_side_by_side_keep_values_that_differ_different():
    assert figures([0.74023, 0.74024]) == ["0.74023", "0.74024"]  # 4 digits would show 0.7402 twice
    assert figures([0.5, 0.25, None]) == ["0.5", "0.25", "none"]


@pytest.mark.parametrize(("value", "shown"), [
    (True, "yes"), (False, "no"), (None, "none"), ([], "none"), ([0.123456, 2], "0.1235, 2"),
    ("two\nlines", "two\nlines"),                     # a line break stays one, inside its cell
    ("evil\u202ename", "evil<U+202E>name"),           # a hidden character is written out
    ("[bold]not markup[/]", "[bold]not markup[/]"),
])
def test_a_cell_shows_words_not_python(value, shown):
    assert cell_text(value) == shown


def test_missing_can_be_worded_for_its_column():
    assert cell_text(None, missing="unknown") == "unknown"


def _printed(shown, room: int) -> list[str]:
    from rich.console import Console

    out = Console(file=io.StringIO(), width=10_000, highlight=False)  # piped: never wraps a line by itself
    fit_table(out, shown, room)
    out.print(shown)
    return out.file.getvalue().splitlines()


def test_a_table_fits_the_room_wrapping_prose_at_spaces():
    shown = table("tier", "summary")
    shown.add_row("statistical", "the weights differ and no same-seed floor was measured, so nothing says by how much " * 3)
    lines = _printed(shown, 60)
    assert max(len(line) for line in lines) <= 60 and len(lines) > 5


def test_a_table_widens_only_as_far_as_its_longest_word_needs():
    digest = "sha256:" + "ab" * 32
    shown = table("field", "value")
    shown.add_row("digest", f"{digest} and some words that wrap where the room ends")
    lines = _printed(shown, 40)
    assert any(digest in line for line in lines)  # whole, on one line
    assert max(len(line) for line in lines) == len(f"│ digest │ {digest} │")
