"""A published report as a paginated PDF for a regulator's file, printed by headless Chromium.

Chromium prints the page with its print CSS (``report.css``): A4, running headers naming the model,
version, verdict and audit (``@page`` margin boxes, which Chromium renders since version 131) and
"page N of M" at the foot; ``--no-pdf-header-footer`` drops Chromium's own date and URL lines. The
HTML is printed as published, from a file, so the PDF shows exactly the page the ledger hashed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from auditor.errors import InfrastructureError, NotFound
from auditor.settings import REPORTS

#: seconds Chromium may take to print one report
PRINT_TIMEOUT_S = 120
_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable on PATH, or None."""
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def print_pdf(html: Path, out: Path, *, chromium: str | None = None) -> Path:
    """Print the HTML file ``html`` to ``out`` (a PDF); returns ``out``."""
    html, out = Path(html).resolve(), Path(out).resolve()
    if not html.is_file():
        raise NotFound(f"report {html} does not exist", hint=f"pass a report's .html file or its stem in {REPORTS.name}")
    binary = chromium or find_chromium()
    if binary is None:
        raise InfrastructureError("no Chromium found on PATH to print the PDF", hint="install Debian's chromium (apt-get install chromium)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="repro-pdf-") as profile:
        argv = [
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", "--no-pdf-header-footer",
            f"--print-to-pdf={out}", html.as_uri(),
        ]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=PRINT_TIMEOUT_S, env={**os.environ, "HOME": profile})
        except subprocess.TimeoutExpired:
            raise InfrastructureError(f"Chromium did not print {html} within {PRINT_TIMEOUT_S} s") from None
    if proc.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        tail = "\n".join((proc.stderr or "").strip().splitlines()[-5:])
        raise InfrastructureError(f"Chromium could not print {html} to {out} (exit {proc.returncode}): {tail}")
    return out


def report_file(ref: str, reports: str, scratch: Path) -> Path:
    """The HTML file a ``report pdf`` argument names: a path to a .html file, or a report's stem (with or
    without ``.html``) in the reports store, copied to ``scratch`` when the store is not local."""
    path = Path(ref)
    if path.suffix == ".html" and path.is_file():
        return path
    from auditor.storage import open_store

    key = ref if ref.endswith(".html") else f"{ref}.html"
    if "/" in key or key.startswith("."):
        raise NotFound(f"report {ref} is neither an .html file nor a report stem in {reports}",
                       hint="pass a path to a report's .html file, or its stem as listed in the index")
    store = open_store(reports)
    if not store.exists(key):
        raise NotFound(f"no report {key} in {store.uri}", hint="pass a report's stem as listed in the index, or a path to its .html file")
    local = store.local_path(key)
    if local is not None:
        return local
    target = scratch / key
    target.write_bytes(store.read(key))
    return target


__all__ = ["find_chromium", "print_pdf", "report_file"]
