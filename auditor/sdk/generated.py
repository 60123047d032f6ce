"""Data a script generates (or downloads) itself, recorded as a snapshot: ``auditor.generated(...)``.

``data={"train": auditor.generated(x=x, y=y)}``: at training time the values are written as ``.npy``
and snapshotted; in a rebuild the script generates them again and they are compared byte for byte
with the recorded snapshot the audit materialised. This module knows nothing of ``Run``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from auditor.contract import data_env_var
from auditor.errors import BadInput
from auditor.lineage.record import DataRef
from auditor.lineage.redact import redacted_logger

log = redacted_logger(__name__)  # the warnings quote data names and snapshot URIs


class GeneratedData:
    """Data a script makes itself, to be recorded as a snapshot: see ``generated``."""

    def __init__(self, values: Any, store: str | None, source: str | None = None) -> None:
        self.values = values
        self.store = store
        self.source = source  # where a download came from (a URL), recorded with its credentials redacted

    def write(self, folder: Path) -> Path:
        """Write the data into ``folder`` (arrays as ``.npy``, no pickle; a file or folder copied); returns it."""
        folder.mkdir(parents=True, exist_ok=True)
        values = self.values
        if isinstance(values, (str, os.PathLike)):
            source = Path(values)
            if source.is_dir():
                shutil.copytree(source, folder, dirs_exist_ok=True)
            elif source.is_file():
                shutil.copy2(source, folder / source.name)
            else:
                raise BadInput(f"generated data {str(source)!r} is neither a file nor a folder")
            return folder
        import numpy as np

        for name, array in _arrays(values, "").items():
            if _is_table(array):  # a DataFrame: Parquet keeps its column names and mixed types (no pickle)
                _write_table(array, folder / f"{name or 'data'}.parquet", name)
            else:
                np.save(folder / f"{name or 'data'}.npy", array, allow_pickle=False)
        return folder


def _is_table(value: Any) -> bool:
    """A pandas DataFrame (duck-typed: pandas is not imported here unless the script did)."""
    return hasattr(value, "to_parquet") and hasattr(value, "columns")


def _write_table(frame: Any, target: Path, name: str) -> None:
    """``frame`` as Parquet (the same rows give the same bytes, which a rebuild compares); read it back with
    ``pandas.read_parquet(run.data_path(...) / "x.parquet")``."""
    try:
        frame.to_parquet(target)
    except ImportError as exc:
        raise BadInput(f"generated data {name!r} is a DataFrame, which is recorded as Parquet: {exc}",
                       hint="pip install pyarrow, or pass the DataFrame's numeric columns as an array") from None
    except (TypeError, ValueError) as exc:  # pyarrow's refusal of a column it cannot type
        raise BadInput(f"generated data {name!r}: a column could not be written as Parquet: {exc}",
                       hint="give each column one type (e.g. df[col].astype(str) for a column of mixed objects)") from None


def generated(*values: Any, store: str | None = None, source: str | None = None, **named: Any) -> GeneratedData:
    """Record data the script generates (or downloads) itself as a snapshot: ``data={"train": auditor.generated(x, y)}``.

    ``values`` are arrays or tensors (``0.npy``, ``1.npy``, …), DataFrames of any column types (``x.parquet``),
    a ``TensorDataset``, a mapping of names to them, or the path of a file or folder the script wrote; ``named``
    gives the names (``x.npy``). At training time they are written as ``.npy``/``.parquet`` and snapshotted into ``store``
    (default ``REPRO_SNAPSHOT_STORE``): the record names that snapshot like any other, so the gate
    and the audit treat it as snapshot data (auditable lineage: the bytes are content-addressed).
    In a rebuild the script generates its data again; the SDK compares it byte for byte with the
    recorded snapshot the audit materialised and warns, naming the files, when the generation did not
    repeat (an unseeded generator). ``run.data_path(name)`` is the snapshot folder in both modes.

    ``source`` is where data the script *downloads* came from (``auditor.generated("data/iris.csv",
    source=URL)``): recorded (credentials redacted) with a content hash of what was downloaded, so a
    rebuild whose download differs says "the source changed since training", naming the URL, instead
    of blaming a generator.
    """
    if values and named:
        raise BadInput("auditor.generated takes positional values or named ones, not both")
    if named:
        return GeneratedData(dict(named), store, source)
    if len(values) == 1:
        return GeneratedData(values[0], store, source)
    if not values:
        raise BadInput("auditor.generated() was given no data", hint="e.g. auditor.generated(x=x, y=y)")
    return GeneratedData(list(values), store, source)


def _arrays(value: Any, prefix: str) -> dict[str, Any]:
    """Arrays and tensors found in ``value`` (nested lists, tuples, mappings, TensorDataset), by dotted name."""
    import numpy as np

    if hasattr(value, "tensors") and isinstance(value.tensors, (list, tuple)):  # torch TensorDataset
        value = list(value.tensors)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_arrays(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, (list, tuple)):
        out = {}
        for index, item in enumerate(value):
            out.update(_arrays(item, f"{prefix}.{index}" if prefix else str(index)))
        return out
    if _is_table(value):
        return {prefix: value}
    if hasattr(value, "to_frame") and getattr(value, "ndim", 0) == 1:  # a pandas Series (a target column)
        numeric = getattr(value.dtype, "kind", "O") in "biuf"
        if not numeric:
            return {prefix: value.to_frame()}
        value = value.to_numpy()  # numeric: an array like any other
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            raise BadInput(f"generated data {prefix!r} is bfloat16, which .npy cannot hold", hint="pass it as float32")
        value = value.numpy()
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise BadInput(f"generated data {prefix!r} holds Python objects; only numeric arrays are recorded")
        return {prefix: np.ascontiguousarray(value)}
    if isinstance(value, (int, float, bool)):
        return {prefix: np.asarray(value)}
    raise BadInput(
        f"generated data {prefix or 'value'!r} is a {type(value).__name__}, not an array, tensor or file",
        hint="pass arrays/tensors, a TensorDataset, a mapping of them, or the path of the file or folder you wrote",
    )


def generated_ref(name: str, spec: GeneratedData, env: Mapping[str, str], rebuild: bool) -> DataRef:
    """The data ref of generated data ``name``: a new snapshot at training time, the audit's folder in a rebuild."""
    if rebuild and _missing_path(spec.values):
        return _recorded_stands_in(name, spec, env)
    with tempfile.TemporaryDirectory(prefix="repro-generated-") as tmp:
        folder = spec.write(Path(tmp) / name)
        if rebuild:
            var = data_env_var(name)
            recorded = env.get(var)
            if not recorded or not Path(recorded).is_dir():
                raise BadInput(f"rebuild mode: {var} is unset; the audit materialises the recorded snapshot of {name!r} there")
            differ = _differing_files(folder, Path(recorded))
            files = ", ".join(differ[:5]) + (" …" if len(differ) > 5 else "")
            if differ and spec.source:
                log.warning("repro: the source changed since training: data %r downloaded from %s differs from the recorded "
                            "snapshot (%s); read it from run.data_path(%r) so a rebuild trains on the recorded bytes",
                            name, _source(spec.source), files, name)
            elif differ:
                log.warning(
                    "repro: generated data %r differs from the recorded snapshot (%s): the script's generation did not "
                    "repeat (seed it, e.g. with a constant seed before auditor.track); the rebuild trains on what it generated",
                    name, files,
                )
            if spec.source:  # what this rebuild downloaded, for the audit to hold against training's download
                return DataRef(kind="path", uri=recorded, source=_source(spec.source), content_hash=folder_digest(folder))
            return DataRef(kind="path", uri=recorded)
        from auditor.settings import snapshot_store_from
        from auditor.snapshots import create_snapshot

        store = spec.store or snapshot_store_from(env)
        if "://" not in store:
            store = str(Path(store).resolve())
        info = create_snapshot(folder, store)
        downloaded = folder_digest(folder) if spec.source else None
    log.info("repro: generated data %r recorded as snapshot %s@%s", name, store, info.id)
    if spec.source:
        return DataRef(kind="snapshot", uri=store, version=info.id, source=_source(spec.source), content_hash=downloaded)
    return DataRef(kind="snapshot", uri=store, version=info.id)


def _missing_path(values: Any) -> bool:
    """``values`` is the path of a file or folder that is not there."""
    return isinstance(values, (str, os.PathLike)) and not Path(values).exists()


def _recorded_stands_in(name: str, spec: GeneratedData, env: Mapping[str, str]) -> DataRef:
    """A rebuild whose workspace lacks the file or folder training recorded (git ignores it, so the checkout has no
    copy): the recorded snapshot stands in for it, as ``run.data_path(name)`` (README: "ignoring the file costs
    nothing: the snapshot holds its bytes"). Nothing is generated, so nothing is compared."""
    var = data_env_var(name)
    recorded = env.get(var)
    if not recorded or not Path(recorded).is_dir():
        raise BadInput(f"rebuild mode: {var} is unset; the audit materialises the recorded snapshot of {name!r} there")
    log.info("repro: %s (data %r) is not in the rebuild's workspace (git ignores it): the recorded snapshot stands in "
             "for it; read it from run.data_path(%r)", os.fspath(spec.values), name, name)
    return DataRef(kind="path", uri=recorded)


def _source(url: str) -> str:
    """A download's URL as recorded: any password or token in it redacted (the one redactor)."""
    from auditor.lineage.redact import redact_text

    return redact_text(str(url))


def folder_digest(folder: Path) -> str:
    """``sha256:<hex>`` over every file's relative path and bytes, in path order: what a download gave."""
    from auditor.digests import hasher, sha256_file_raw, spelled

    outer = hasher()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        outer.update(path.relative_to(folder).as_posix().encode() + b"\0" + sha256_file_raw(path))
    return spelled(outer.hexdigest())


def _differing_files(ours: Path, recorded: Path) -> list[str]:
    """Files (relative paths) that are in only one of the folders or differ in their bytes."""
    mine = {p.relative_to(ours).as_posix(): p for p in ours.rglob("*") if p.is_file()}
    theirs = {p.relative_to(recorded).as_posix(): p for p in recorded.rglob("*") if p.is_file()}
    differ = sorted(set(mine) ^ set(theirs))
    for rel in sorted(set(mine) & set(theirs)):
        if mine[rel].read_bytes() != theirs[rel].read_bytes():
            differ.append(rel)
    return differ
