"""The docs test's markers themselves (tests/docs/blocks.py): parsed as written, refused when they apply to nothing."""

from __future__ import annotations

import pytest

from tests.docs.blocks import MarkerError, covered_test_exists, parse

PAGE = """\
<!-- docs-test: sandbox: project -->
<!-- docs-test: setup: git init -q -->
# A page

1. **A step**:

    <!-- docs-test: skip: a reason -->
    ```bash
    pip install something
    ```

<!-- docs-test: file: train.py -->
```python
print("hi")
```

<!-- docs-test: exit: 1 -->
<!-- docs-test: expect: LINEAGE_INSUFFICIENT -->
```console
$ repro-audit adopt models:/churn/1
models:/churn/1: LINEAGE_INSUFFICIENT
```

```gitignore
.repro/
```
"""


def test_a_page_parses_into_its_blocks_markers_sandbox_and_setup():
    page = parse("x.md", PAGE)
    assert page.sandbox == "project" and page.setup == ["git init -q"]
    skip, file, console, ignored = page.blocks
    assert (skip.line, skip.language, skip.markers, skip.runs) == (8, "bash", {"skip": "a reason"}, False)
    assert skip.text == "pip install something\n"  # dedented out of the list item
    assert file.markers == {"file": "train.py"} and file.runs
    assert console.markers == {"exit": "1", "expect": "LINEAGE_INSUFFICIENT"}
    assert console.command == "repro-audit adopt models:/churn/1"
    assert not ignored.runs  # another language, no file marker: not run


def test_a_page_without_a_sandbox_gets_its_own():
    assert parse("how-to/x.md", "# x\n").sandbox == "page:how-to/x.md"


@pytest.mark.parametrize("text", [
    "<!-- docs-test: skip: why -->\nsome prose\n```bash\nls\n```\n",  # not just above the block
    "<!-- docs-test: skip: why -->\n",  # no block after it
    "<!-- docs-test: skipp: why -->\n```bash\nls\n```\n",  # a marker it does not know
    "<!-- docs-test: skip -->\n```bash\nls\n```\n",  # a skip without its reason
    "<!-- docs-test: skip: why -->\n<!-- docs-test: expect: x -->\n```bash\nls\n```\n",  # skipped and checked
    "<!-- docs-test: exit: one -->\n```bash\nls\n```\n",
    "```bash\nls\n",  # never closed
], ids=["prose between", "no block", "unknown", "no reason", "skip and expect", "exit not a number", "unclosed"])
def test_a_marker_that_applies_to_nothing_is_refused(text):
    with pytest.raises(MarkerError):
        parse("x.md", text)


def test_covered_by_must_name_a_test_that_exists():
    assert covered_test_exists("tests/docs/test_docs_markers.py::test_covered_by_must_name_a_test_that_exists") is None
    assert "defines no test" in covered_test_exists("tests/docs/test_docs_markers.py::test_gone")
    assert "does not exist" in covered_test_exists("tests/docs/test_nope.py::test_x")
    assert "is not tests/FILE.py::TEST_NAME" in covered_test_exists("tests/docs/test_docs_markers.py")
