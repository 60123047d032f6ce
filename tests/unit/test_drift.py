"""Environment drift between a recorded and a rebuilt environment section."""

from __future__ import annotations

from auditor.lineage.record import EnvironmentInfo
from auditor.rebuild.drift import environment_drift


def _env(**overrides) -> EnvironmentInfo:
    base = {
        "python": "3.11.7",
        "implementation": "CPython",
        "machine": "x86_64",
        "packages": {"torch": "2.13.0", "numpy": "2.4.6", "Foo_Bar": "1.0"},
        "torch": "2.13.0+cpu",
        "threads": {"torch_intra_op": 2, "OMP_NUM_THREADS": "2", "MKL_CBWR": "AVX2"},
        "image_digest": "sha256:" + "a" * 64,
    }
    base.update(overrides)
    return EnvironmentInfo(**base)


def test_identical_environments_have_no_drift():
    drift = environment_drift(_env(), _env())
    assert drift.empty
    assert drift.model_dump() == {"added": {}, "removed": {}, "changed": {}, "fields": {}}


def test_packages_added_removed_and_changed_are_each_listed():
    rebuilt = _env(packages={"torch": "2.13.1", "Foo_Bar": "1.0", "pandas": "2.2.0"})
    drift = environment_drift(_env(), rebuilt)
    assert drift.added == {"pandas": "2.2.0"}
    assert drift.removed == {"numpy": "2.4.6"}
    assert drift.changed == {"torch": ("2.13.0", "2.13.1")}
    assert not drift.empty


def test_package_names_are_compared_in_normal_form():
    rebuilt = _env(packages={"torch": "2.13.0", "numpy": "2.4.6", "foo-bar": "1.0"})
    assert environment_drift(_env(), rebuilt).empty


def test_interpreter_cuda_accelerator_and_image_changes_are_fields_with_both_values():
    rebuilt = _env(
        python="3.12.1",
        cuda="12.4",
        cudnn="90100",
        driver="550.54",
        accelerator="NVIDIA H200",
        accelerator_count=1,
        image_digest="sha256:" + "b" * 64,
    )
    fields = environment_drift(_env(), rebuilt).fields
    assert fields["python"] == ("3.11.7", "3.12.1")
    assert fields["cuda"] == (None, "12.4")
    assert fields["cudnn"] == (None, "90100")
    assert fields["driver"] == (None, "550.54")
    assert fields["accelerator"] == (None, "NVIDIA H200")
    assert fields["accelerator_count"] == (0, 1)
    assert fields["image_digest"] == ("sha256:" + "a" * 64, "sha256:" + "b" * 64)
    assert "torch" not in fields


def test_thread_settings_are_compared_key_by_key():
    rebuilt = _env(threads={"torch_intra_op": 1, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "1"})
    fields = environment_drift(_env(), rebuilt).fields
    assert fields == {
        "threads.torch_intra_op": (2, 1),
        "threads.MKL_CBWR": ("AVX2", None),
        "threads.MKL_NUM_THREADS": (None, "1"),
    }


def test_drift_serialises_into_the_audit_result_shape():
    drift = environment_drift(_env(), _env(python="3.12.1"))
    assert drift.model_dump(mode="json")["fields"] == {"python": ["3.11.7", "3.12.1"]}
