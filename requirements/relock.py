"""Move the committed lock: re-resolve, prove the new set, and write it only when the proof passes (``make lock``).

1. ``uv pip compile`` of ``pyproject.toml``'s ``dev`` extra plus ``requirements/lock.in`` at the newest releases
   (``--upgrade``), with hashes, into a scratch folder;
2. a scratch virtual environment installs exactly that resolution (``uv pip sync``), the project editable on top;
3. the smoke checks that would have caught the night that audited nothing run with that environment's Python:
   ``dag.test()`` of the nightly on the embedded default world, one PyTorch and one tabular audit, the no-extras
   CLI installed at the new lock's versions (``SMOKE`` below);
4. only when every check passes is ``requirements/dev.lock.txt`` replaced; either way the packages that moved
   are printed. Exit 0: the lock moved (or nothing moved); 1: a check failed and the lock was left as it was.

Run it when a dependency must move (a security fix, a feature) and on a schedule (monthly), on a quiet machine:
the checks take a few minutes. ``--keep`` leaves the scratch folder for a look at a failure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "dev.lock.txt"
LOCK_IN = ROOT / "requirements" / "lock.in"
#: the smoke checks: real tests of the suite, each a path the night that audited nothing went through
SMOKE = (
    "tests/dags/test_nightly_dag.py",  # dag.test() of repro_nightly_audit on a seeded world of the embedded default
    "tests/dags/test_night_failure.py",  # a night that fails before auditing fails repro-audit demo, loudly
    "tests/integration/test_onboarding.py::test_a_public_argparse_script_adapted_with_the_readme_reaches_reproduced_bitwise",
    "tests/integration/test_tabular_audit.py::test_a_clean_run_is_reproduced_bitwise_on_its_normalised_model",
    "tests/integration/test_core_install.py",  # the no-extras CLI, at the new lock's versions
)


def _torch_wheels() -> str:
    """Where torch's CPU wheel comes from: this kind of machine's disk, else PyTorch's CPU index (as the Makefile)."""
    return "/opt/wheels" if any(Path("/opt/wheels").glob("torch-*")) else "https://download.pytorch.org/whl/cpu/torch/"


def _uv() -> str:
    found = Path(sys.executable).with_name("uv")
    return str(found) if found.exists() else (shutil.which("uv") or sys.exit("relock: uv not found (run `make venv` first)"))


def _run(argv: list[str], **kwargs) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, check=True, **kwargs)


def resolve(scratch: Path) -> Path:
    """The newest resolution, with hashes, in ``scratch``."""
    out = scratch / "dev.lock.txt"
    _run([_uv(), "pip", "compile", "pyproject.toml", str(LOCK_IN.relative_to(ROOT)), "--extra", "dev", "--upgrade",
          "--find-links", _torch_wheels(), "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
          "--generate-hashes", "--no-header", "-q", "-o", str(out)], cwd=ROOT)
    return out


def build(scratch: Path, lock: Path) -> Path:
    """A scratch venv holding exactly ``lock`` and the project (editable)."""
    venv = scratch / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    _run([_uv(), "pip", "sync", "-q", "--python", str(python), "--find-links", _torch_wheels(), str(lock)])
    _run([_uv(), "pip", "install", "-q", "--python", str(python), "--no-deps", "-e", str(ROOT)])
    return python


def smoke(python: Path, lock: Path) -> bool:
    """The smoke checks with ``python``; the no-extras install is held to ``lock`` (REPRO_TEST_LOCK)."""
    env = {**os.environ, "REPRO_TEST_LOCK": str(lock)}
    started = time.monotonic()
    result = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
                             *SMOKE], cwd=ROOT, env=env, check=False)
    print(f"relock: smoke checks {'passed' if result.returncode == 0 else 'FAILED'} in {time.monotonic() - started:.0f} s")
    return result.returncode == 0


def moved(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """One line per package that moved, appeared or went away."""
    lines = [f"  {n}: {old[n]} -> {new[n]}" for n in sorted(old.keys() & new.keys()) if old[n] != new[n]]
    lines += [f"  {n}: (new) {new[n]}" for n in sorted(new.keys() - old.keys())]
    lines += [f"  {n}: {old[n]} (removed)" for n in sorted(old.keys() - new.keys())]
    return lines


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from auditor.report.itself import lock_pins

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="repro-relock-"))
    try:
        candidate = resolve(scratch)
        old, new = lock_pins(LOCK.read_text()), lock_pins(candidate.read_text())
        changes = moved(old, new)
        print(f"relock: {len(changes)} package(s) moved" + (":\n" + "\n".join(changes) if changes else ""))
        if not changes:
            print("relock: the lock is already the newest resolution; nothing written")
            return 0
        if not smoke(build(scratch, candidate), candidate):
            print(f"relock: a smoke check failed: {LOCK.relative_to(ROOT)} left as it was (bound the package that broke it "
                  "in pyproject.toml, with the failure in a comment, then run `make lock` again)")
            return 1
        shutil.copyfile(candidate, LOCK)
        print(f"relock: wrote {LOCK.relative_to(ROOT)}; commit it with the list above in the message")
        return 0
    finally:
        if args.keep:
            print(f"relock: scratch folder kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
