"""The demo's reports in headless Chromium (issue 40, acceptance 2): screenshots, and the checks a validator would make.

After ``make demo``::

    PYTHONPATH=. .venv/bin/python docs/screenshots/demo_reports.py reports docs/screenshots

For the newest report of each of three demo versions it takes a screenshot and checks the page Chromium rendered:
the XGBoost version whose rebuild resolves another learning rate headlines that parameter with both values and the
flip count, its first Bitwise finding is the parameter, its problem box shows where (by score) the decisions flip and
its weights section the first divergent tree beside its registered twin; the PyTorch OUT_OF_TOLERANCE version's headline and floor
picture agree (the spread drawn red as the failing evidence, no green "within the limit" dot); the clean reference
version carries no warning. Exits 1 naming each check that failed.
"""

from __future__ import annotations

import html as htmllib
import json
import re
import subprocess
import sys
from pathlib import Path

from shots import screenshot

#: (registered model, version, screenshot file)
PAGES = (("credit-xgboost", "2", "demo-xgboost-learning-rate.png"),
         ("credit-scorer", "4", "demo-pytorch-same-seed-spread.png"),
         ("credit-scorer", "1", "demo-reference-clean.png"))


def newest(reports: Path, name: str, version: str) -> Path:
    found = sorted(reports.glob(f"{name}_v{version}_*.html"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise SystemExit(f"no report of {name} v{version} in {reports}: run `make demo` first")
    return found[-1]


def rendered(page: Path) -> str:
    """The DOM as Chromium rendered it (not the file's bytes)."""
    out = subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=180, check=True)
    return out.stdout


def text(fragment: str) -> str:
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def checks(name: str, version: str, dom: str, evidence: dict) -> list[str]:
    banner = text(dom[dom.index('id="verdict"'):dom.index("</header>")])
    failed = []
    if (name, version) == ("credit-xgboost", "2"):
        if not re.search(r"learning rate 0\.12 where training used 0\.1; \d+ of \d+ decisions flip", banner):
            failed.append(f"xgboost headline: {banner[:200]}")
        bitwise = dom[dom.index("<td>Bitwise</td>"):]
        first = text(bitwise[bitwise.index("<li>"):bitwise.index("</li>")])
        if not first.startswith("parameter ") or "eta" not in first:
            failed.append(f"xgboost first bitwise finding: {first}")
        box = dom[dom.index('id="problems"'):dom.index("</section>", dom.index('id="problems"'))]
        if 'class="flips-strip"' not in box:
            failed.append("xgboost picture: the problem box does not show where the decisions flip")
        if "beside its registered twin" not in dom:
            failed.append("xgboost: no first divergent tree beside its twin")
    elif version == "4":
        svg = dom[dom.index('class="floor-strip"'):dom.index("</svg>", dom.index('class="floor-strip"'))]
        if "same-seed reruns differ" not in banner:
            failed.append(f"pytorch headline: {banner[:200]}")
        if 'fill="#f3c7c7"' not in svg or 'fill="#2e7d32"' in svg:
            failed.append("pytorch picture: the spread is not drawn as the failing evidence")
    else:
        warnings = [f"{f['code']}: {f['message']}" for f in evidence["audit"]["findings"] if f["severity"] == "warning"]
        if warnings or "[warning]" in dom:
            failed.append(f"reference clean version warns: {warnings}")
    return failed


def main(reports: Path, out: Path) -> int:
    failed = []
    for name, version, shot in PAGES:
        page = newest(reports, name, version)
        evidence = json.loads(page.with_suffix(".json").read_text())
        found = checks(name, version, rendered(page), evidence)
        screenshot(page.as_uri(), out / shot, size="1100,1500")
        print(f"{'FAIL' if found else 'ok  '} {name} v{version}: {page.name} -> {out / shot}")
        failed += found
    for line in failed:
        print("  -", line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()))
