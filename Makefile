# The two commands: `make demo` and `make test`. Both set up what they need.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LOCK := requirements/dev.lock.txt

.PHONY: lock demo test test-fast test-all test-extended test-image test-compose lint bench sysdeps venv clean image image-base \
	docs docs-serve docs-reference screenshots

venv: $(STAMP)

# Every environment of the project (dev, test, demo) installs exactly the committed lock, never a fresh
# resolution: requirements/dev.lock.txt (uv's requirements lock, with hashes) holds every package at one
# version, torch's CPU build included. `uv pip sync` makes the venv exactly the lock (it removes anything
# else), then the project goes in editable without its dependencies. Move the lock with `make lock`.
# --compile-bytecode: uv, unlike pip, writes no .pyc files, and where PYTHONDONTWRITEBYTECODE is set (as on these
# machines) no interpreter ever caches one: every CLI call and every rebuild then compiles MLflow, torch and the rest
# anew (measured 2026-12-05: registry look-up 5.4 s -> 2.3 s in `repro-audit audit`; bench/README.md).
UV_VERSION := $(shell sed -n 's/^uv==\([0-9.]*\).*/\1/p' $(LOCK))
# torch's CPU wheel: from this kind of machine's disk, else from PyTorch's own CPU index (same file, same hash)
TORCH_WHEELS ?= $(if $(wildcard /opt/wheels/torch-*),/opt/wheels,https://download.pytorch.org/whl/cpu/torch/)
$(STAMP): $(LOCK) pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check "uv==$(UV_VERSION)"
	$(VENV)/bin/uv pip sync -q --python $(PY) --compile-bytecode --find-links $(TORCH_WHEELS) $(LOCK)
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	$(PY) -m compileall -q -j 0 auditor
	touch $(STAMP)

# Move the lock: re-resolve to the newest releases in a scratch venv, run the smoke checks there, and write
# requirements/dev.lock.txt only when they pass, printing which packages moved (requirements/relock.py).
lock: venv
	$(PY) requirements/relock.py

# System packages the tests drive for real: a Docker engine and a headless browser.
sysdeps:
	bash .ci/sysdeps

# pytest's exit 5 (no test collected) must never read as a pass. Three workers (pytest-xdist), each taking a
# whole test file at a time, so a module's fixtures are built once. Three on 2 cores because the suite waits a
# good part of its time (servers starting, image pushes, subprocesses): measured 2026-12-03 on a quiet 2-core
# machine, eight integration files took 276 s with two workers and 243 s with three. --durations prints the
# slowest steps. A plain `pytest` (one file, one test) stays in one process.
test: venv sysdeps
	$(PY) -m pytest -q -n 3 --dist loadfile --durations=30 -m 'not compose_e2e and not extended'; rc=$$?; if [ $$rc -eq 5 ]; then echo 'make test: pytest collected no test' >&2; exit 1; fi; exit $$rc

# The unit tier alone: pure by rule (tests/unit/conftest.py fails a test that starts a subprocess, forks,
# opens a socket or a database), no system packages needed; its measured time is in docs/how-to/develop.md.
# Run it many times a session.
test-fast: venv
	$(PY) -m pytest -q -p no:cacheprovider tests/unit; rc=$$?; if [ $$rc -eq 5 ]; then echo 'make test-fast: pytest collected no test' >&2; exit 1; fi; exit $$rc

# Everything CI runs, plus the compose stack (make test-compose).
test-all: test test-extended test-compose

# The second cases of mechanisms CI already covers (marker `extended`), left out of `make test` for CI's time.
test-extended: venv sysdeps
	$(PY) -m pytest -q -n 3 --dist loadfile -m extended

# The Debian base (mmdebstrap) and the CPU trainer built from docker/Dockerfile on it, into the engine at
# DOCKER_HOST (default: the system's); each is skipped when the engine, or the cache folder
# REPRO_IMAGE_CACHE (default ~/.cache/repro-audit/images), already holds its recipe's digest.
image: venv sysdeps
	$(PY) docker/images.py trainer

# The image end-to-end and reconstructed-environment tests of issue 15 alone (they are part of `make test`
# too; the first run builds the images and environments: see docker/README.md).
test-image: venv sysdeps
	$(PY) -m pytest -q -m image_e2e tests/integration/test_image_e2e.py tests/integration/test_reconstructed_env.py

# docker/compose.yaml up for real on this host through docker/compose.host.yaml (host networking, 127.0.0.1,
# images from docker/images.py), then repro_nightly_audit through it (opt-in; see docker/README.md).
test-compose: venv sysdeps
	$(PY) -m pytest -q -m compose_e2e tests/deploy/test_compose_up.py

image-base: venv sysdeps
	$(PY) docker/images.py base

lint: venv
	$(VENV)/bin/ruff check auditor dags tests bench examples
	$(VENV)/bin/lint-imports

demo: venv
	$(VENV)/bin/repro-audit demo

bench: venv
	$(VENV)/bin/uv pip install -q --python $(PY) -e ".[dev,bench]"
	for script in bench/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf .repro
	find reports -mindepth 1 ! -name .gitkeep -exec rm -rf {} +

# The documentation site (mkdocs.yml, Material theme): built with --strict into build/site (a broken link or anchor
# fails it; tests/docs/test_docs_site_builds.py does the same in `make test`), or served on 127.0.0.1:8000.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve -a 127.0.0.1:8000

# The pages generated from the code (the CLI, the settings catalog, the exit codes, the regulatory map):
# tests/docs/test_docs_reference_pages.py fails until they are written again and committed.
docs-reference: venv
	$(PY) docs/gen_reference.py

# The screenshots of docs/screenshots/ (docs/screenshots/README.md says what each shows), each taken again by the
# script beside it in headless Chromium: make demo's reports (demo_reports.py checks what each must show), its audit
# run in MLflow's UI, the nightly DAG's grid in Airflow's UI, two reports in MLflow's artifact viewer. Runs make demo
# first (about 5.5 minutes) when .repro/demo holds no demo.
screenshots: venv sysdeps
	test -f .repro/demo/mlflow.db || $(MAKE) demo
	PYTHONPATH=. $(PY) docs/screenshots/demo_reports.py reports docs/screenshots
	PYTHONPATH=. $(PY) docs/screenshots/mlflow_run.py .repro/demo docs/screenshots
	PYTHONPATH=. $(PY) docs/screenshots/airflow_grid.py . docs/screenshots
	REPRO_SCREENSHOTS=docs/screenshots $(PY) -m pytest -q -p no:cacheprovider tests/browser/test_mlflow_report_browser.py
