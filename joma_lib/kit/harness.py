"""Regenerate, save, verify and show registry figures.

The three ways a figure is used all go through :func:`compute`:

* the book page calls :func:`show` (compute, draw, save PNG/SVG/npz/CSV for download, glue the figure for a
  numbered, citable caption);
* ``python -m joma_lib.figures make`` saves the same files anywhere;
* ``python -m joma_lib.figures verify`` compares the data with the committed reference
  (``joma_lib/figures/reference/<fig_id>.npz`` + ``.json``).

A *figure store* (the folder named by ``JOMA_FIGURE_STORE``) lets one run compute each figure once: :func:`show`
keeps there the data it computed (npz + json manifest, as a reference), and ``verify --from``, the tests and the
Colab rehearsal take them from there (:func:`stored_or_computed`) instead of computing them again. CI points it
at ``_build/figure_data`` while it builds the book; a reader who sets nothing computes everything, as before.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import platform
import sys
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from joma_lib.base.cpu import bf16_support, onednn_isa_limit
from joma_lib.base.device import on_gpu
from joma_lib.base.io import (InputCorruptError, InputUnavailableError, atomic_path, atomic_paths, remove_stale_temps,
                         writable_dir, write_npz)
from joma_lib.kit.glue import glue
from joma_lib.kit.phone import TEXT_PX_KEY, smallest_text_px, stack_for_phone
from joma_lib.kit.receipts import keep_receipt
from joma_lib.kit.registry import FigureData, FigureSpec, Tolerance, get_spec
from joma_lib.kit.style import figure_style, fix_layout
from joma_lib.base.precision import precisions_used
from joma_lib.base.startup import declare_env

REFERENCE_DIR = Path(__file__).parents[1] / "figures" / "reference"
# Figures with more values than this offer their CSV gzipped (``<fig_id>.csv.gz``): no multi-megabyte download
CSV_GZIP_ABOVE = 50_000
PHONE_SUFFIX = "phone.png"  # the phone layout of a figure, served to narrow screens (_ext/sphinx_figures.py)
STORE_ENV = "JOMA_FIGURE_STORE"
"""Environment variable naming the figure store (see the module docstring); unset: no store."""
declare_env(STORE_ENV, "a writable folder (created if missing)", lambda value: writable_dir(value, STORE_ENV))


class MissingReferenceError(RuntimeError):
    """Raised when a figure has no usable committed reference data to verify against."""


class CorruptReferenceError(MissingReferenceError):
    """The reference files exist but cannot be trusted: unreadable npz, missing or disagreeing json manifest."""


def compute(fig_id: str, **overrides: Any) -> FigureData:
    """Run the figure's ``make`` with its registered ``params`` (updated by ``overrides``)."""
    spec = get_spec(fig_id)
    params = {**spec.params, **overrides}
    data = spec.make(**params)
    return {name: np.asarray(value) for name, value in data.items()}


def draw(fig_id: str, data: FigureData) -> Figure:
    """Draw ``data`` with the figure's ``plot`` in the shared style."""
    with figure_style():
        return get_spec(fig_id).plot(data)


def write_csv(path: Path, data: FigureData) -> None:
    """Save ``data`` as one long CSV (columns ``array, index, value``), atomically.

    ``index`` is the comma-joined multi-index of the element, empty for scalars, so every array of the figure fits
    one file that any spreadsheet opens. A path ending in ``.gz`` is written gzip-compressed (byte-stable: no time
    stamp in the header)."""
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["array", "index", "value"])
    for name, array in data.items():
        for index, value in np.ndenumerate(array):
            writer.writerow([name, ",".join(map(str, index)), repr(value.item())])
    raw = text.getvalue().encode()
    with atomic_path(path) as tmp:
        tmp.write_bytes(gzip.compress(raw, mtime=0) if path.suffix == ".gz" else raw)


def csv_name(fig_id: str, data: FigureData) -> str:
    """File name of the figure's CSV: ``.csv``, or ``.csv.gz`` above :data:`CSV_GZIP_ABOVE` values."""
    n_values = sum(np.asarray(array).size for array in data.values())
    return f"{fig_id}.csv.gz" if n_values > CSV_GZIP_ABOVE else f"{fig_id}.csv"


def save_outputs(fig_id: str, fig: Figure, data: FigureData, out_dir: Path) -> list[Path]:
    """Write ``<fig_id>.png``, ``.svg``, ``.npz``, the CSV (:func:`csv_name`) and the phone layout
    ``<fig_id>.phone.png`` (:func:`~joma_lib.kit.phone.stack_for_phone`) into ``out_dir``; return the paths.

    All land or none does: each is written to a temporary file first, and they are renamed into place only when
    all are written. A failed write (a full disk) raises an ``OSError`` that names the file and the figure, and
    leaves neither temporary files nor a partial set behind (earlier files of the figure are kept).
    """
    out_dir = Path(out_dir)
    paths = [out_dir / f"{fig_id}.{ext}" for ext in ("png", "svg", "npz")] + [out_dir / csv_name(fig_id, data),
                                                                              out_dir / f"{fig_id}.{PHONE_SUFFIX}"]
    current = paths[0]
    try:
        with figure_style():
            phone = stack_for_phone(get_spec(fig_id).plot(data))
            for drawn in (fig, phone):  # each then drawn at its saves only (twice a save: bbox_inches="tight")
                fix_layout(drawn)

            def image(drawn: Figure) -> Callable[[Path, Path], None]:
                return lambda tmp, path: drawn.savefig(tmp, format=path.suffix[1:], bbox_inches="tight",
                                                       metadata=_image_metadata(path, drawn))

            writers = [image(fig), image(fig), lambda tmp, _: write_npz(tmp, data),
                       lambda tmp, _: write_csv(tmp, data), image(phone)]
            with atomic_paths(paths) as tmps:
                for writer, tmp, current in zip(writers, tmps, paths):
                    writer(tmp, current)
    except OSError as err:
        raise OSError(err.errno, f"could not write {current} of figure {fig_id!r} ({err.strerror or err}); "
                                 f"none of its files {[p.name for p in paths]} was written") from err
    return paths


def _image_metadata(path: Path, fig: Figure) -> dict[str, Any]:
    """Metadata that keeps saved images free of timestamps (byte-stable SVG/PNG); a PNG also records the
    height in its own pixels of its smallest text (:data:`TEXT_PX_KEY`, read by the book's browser test)."""
    if path.suffix == ".svg":
        return {"Date": None}
    dpi = matplotlib.rcParams["savefig.dpi"]
    return {TEXT_PX_KEY: f"{smallest_text_px(fig, fig.dpi if dpi == 'figure' else float(dpi)):.2f}"}


def _environment() -> dict[str, str]:
    import scipy
    import torch

    return {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "torch": torch.__version__, "matplotlib": matplotlib.__version__, "device": "cuda" if on_gpu() else "cpu"}


def reference_path(fig_id: str, reference_dir: Path | None = None) -> Path:
    """The reference npz of ``fig_id`` that applies here: ``<fig_id>.npz``, or ``<fig_id>.<variant>.npz`` for a
    figure whose :attr:`~joma_lib.kit.registry.FigureSpec.reference_variant` names one (its json beside it)."""
    variant_of = get_spec(fig_id).reference_variant
    variant = variant_of() if variant_of is not None else ""
    return Path(reference_dir or REFERENCE_DIR) / (f"{fig_id}.{variant}.npz" if variant else f"{fig_id}.npz")


def update_reference(fig_id: str, reference_dir: Path | None = None) -> Path:
    """Regenerate ``fig_id``'s data and store it as the committed reference (npz + json manifest), recording the
    training precision of any language model it trained."""
    with precisions_used() as used:
        data = compute(fig_id)
    return write_reference(fig_id, data, reference_dir, precision=",".join(sorted(used)))


def write_reference(fig_id: str, data: FigureData, reference_dir: Path | None = None, precision: str = "") -> Path:
    """Store ``data`` as ``fig_id``'s reference: the npz and its json manifest (sha256, array names/shapes/dtypes,
    the environment: versions, device, oneDNN's instruction-set ceiling and ``precision``, the training precision
    of the language models it trained, if any)."""
    spec = get_spec(fig_id)
    npz_path = reference_path(fig_id, reference_dir)
    write_npz(npz_path, data)
    manifest = {
        "fig_id": fig_id,
        "title": spec.title,
        "paper_ref": spec.paper_ref,
        "params": {k: _jsonable(v) for k, v in spec.params.items()},
        "arrays": {
            name: {"shape": list(array.shape), "dtype": str(array.dtype),
                   "rtol": spec.tolerance(name).rtol, "atol": spec.tolerance(name).atol}
            for name, array in data.items()
        },
        "sha256": hashlib.sha256(npz_path.read_bytes()).hexdigest(),
        "environment": {**_environment(), "onednn_isa_limit": onednn_isa_limit(),
                        **({"precision": precision} if precision else {})},
    }
    json_path = npz_path.with_suffix(".json")
    with atomic_path(json_path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return npz_path


def _jsonable(value: Any) -> Any:
    """A JSON-friendly copy of a parameter value (tuples and arrays become lists)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in np.asarray(value).tolist()] if isinstance(value, np.ndarray) else [
            _jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def load_reference(fig_id: str, reference_dir: Path | None = None) -> FigureData:
    """The committed reference data of ``fig_id``, checked against its json manifest.

    :class:`MissingReferenceError` if there is none; :class:`CorruptReferenceError` if the manifest is missing or
    unreadable, the npz's sha256 differs from the manifest's, the npz cannot be read, or its array names, shapes or
    dtypes differ from the manifest's. Each message names the file and how to regenerate it.
    """
    path = reference_path(fig_id, reference_dir)
    update = f"run `python -m joma_lib.figures update {fig_id}`"
    regenerate = f"{update} (or restore both files from git)"
    if not path.exists():
        raise MissingReferenceError(f"no reference data for {fig_id!r} at {path}; {update} and commit it")
    manifest_path = path.with_suffix(".json")

    def corrupt(problem: str) -> CorruptReferenceError:
        return CorruptReferenceError(f"corrupt reference for {fig_id!r}: {problem}; {regenerate}")

    try:
        manifest = json.loads(manifest_path.read_text())
        expected = {name: (tuple(a["shape"]), str(a["dtype"])) for name, a in manifest["arrays"].items()}
        sha256 = str(manifest["sha256"])
    except FileNotFoundError:
        raise corrupt(f"its manifest {manifest_path} is missing") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise corrupt(f"its manifest {manifest_path} is unreadable ({type(err).__name__}: {err})") from None
    actual_sha = hashlib.sha256(path.read_bytes()).hexdigest()
    if actual_sha != sha256:
        raise corrupt(f"{path} has sha256 {actual_sha[:12]}..., its manifest {manifest_path.name} says {sha256[:12]}..."
                      " (the file was damaged or edited without `update`)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            data = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as err:
        raise corrupt(f"{path} is not a readable npz archive ({type(err).__name__})") from None
    actual = {name: (array.shape, str(array.dtype)) for name, array in data.items()}
    if set(actual) != set(expected):
        raise corrupt(f"{path} holds the arrays {sorted(actual)}, its manifest names {sorted(expected)}")
    for name, (shape, dtype) in sorted(expected.items()):
        if actual[name][0] != shape:
            raise corrupt(f"array {name!r} of {path} has shape {actual[name][0]}, the manifest says {shape}")
        if actual[name][1] != dtype:
            raise corrupt(f"array {name!r} of {path} has dtype {actual[name][1]}, the manifest says {dtype}")
    return data


@dataclass(frozen=True)
class Comparison:
    """Outcome of comparing one figure's regenerated data with its reference."""

    fig_id: str
    passed: bool
    worst_array: str
    max_abs_dev: float
    rtol: float
    atol: float
    ratio: float  # max over elements of |new-ref| / (atol + rtol |ref|); <= 1 passes
    message: str = ""


def calibrated_tolerances(fig_id: str, reference_dir: Path | None = None) -> dict[str, Tolerance]:
    """The tolerances measured by ``calibrate`` and stored in ``fig_id``'s reference json (empty if none).

    See :mod:`joma_lib.kit.calibration`; they replace the spec's tolerances of trained figures. A malformed
    ``calibration`` block (not an object, no ``arrays``, an array without ``rtol``/``atol``, a tolerance that is
    not a finite number >= 0) raises :class:`CorruptReferenceError` naming the file and the field, which
    ``verify`` reports for this figure before it goes on with the next.
    """
    json_path = reference_path(fig_id, reference_dir).with_suffix(".json")
    if not json_path.exists():
        return {}

    def corrupt(problem: str) -> CorruptReferenceError:
        return CorruptReferenceError(
            f"corrupt reference for {fig_id!r}: {json_path}: {problem}; re-run `python -m joma_lib.figures calibrate "
            f"{fig_id}` (or restore the file from git)")

    try:
        record = json.loads(json_path.read_text()).get("calibration")
    except (ValueError, AttributeError) as err:
        raise corrupt(f"unreadable manifest ({type(err).__name__}: {err})") from None
    if record is None or record == {}:
        return {}
    arrays = record.get("arrays") if isinstance(record, dict) else None
    if not isinstance(arrays, dict):
        raise corrupt(f"the field 'calibration.arrays' must be an object of per-array tolerances, got "
                      f"{arrays if isinstance(record, dict) else record!r}")

    def number(name: str, entry: dict[str, Any], key: str) -> float:
        field = f"'calibration.arrays.{name}.{key}'"
        if key not in entry:
            raise corrupt(f"the field {field} is missing")
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
            raise corrupt(f"the field {field} must be a finite number >= 0, got {value!r}")
        return float(value)

    tolerances = {}
    for name, entry in arrays.items():
        if not isinstance(entry, dict):
            raise corrupt(f"the field 'calibration.arrays.{name}' must be an object, got {entry!r}")
        gpu_atol = number(name, entry, "gpu_atol") if entry.get("gpu_atol") is not None else None
        tolerances[name] = Tolerance(rtol=number(name, entry, "rtol"), atol=number(name, entry, "atol"),
                                     gpu_atol=gpu_atol)
    return tolerances


def compare(spec: FigureSpec, new: FigureData, ref: FigureData, gpu: bool = False,
            tolerances: Mapping[str, Tolerance] | None = None) -> Comparison:
    """Compare every array of ``new`` with ``ref`` under per-array tolerances.

    ``tolerances`` (e.g. :func:`calibrated_tolerances`) take precedence over the spec's.
    """
    if set(new) != set(ref):
        missing, extra = sorted(set(ref) - set(new)), sorted(set(new) - set(ref))
        return Comparison(spec.fig_id, False, "-", float("nan"), 0.0, 0.0, float("inf"),
                          f"array names differ (missing {missing}, unexpected {extra})")
    worst = Comparison(spec.fig_id, True, "-", 0.0, 0.0, 0.0, -1.0)
    for name in sorted(ref):
        a, b = np.asarray(new[name]), np.asarray(ref[name])
        rtol, atol = (tolerances or {}).get(name, spec.tolerance(name)).for_device(gpu)
        if a.shape != b.shape:
            return Comparison(spec.fig_id, False, name, float("nan"), rtol, atol, float("inf"),
                              f"shape {a.shape} != reference {b.shape}")
        if a.dtype.kind not in "fciub" or b.dtype.kind not in "fciub":
            same = bool(np.array_equal(a, b))
            if not same:
                return Comparison(spec.fig_id, False, name, float("nan"), rtol, atol, float("inf"), "values differ")
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        nan_mismatch = np.isnan(a64) != np.isnan(b64)
        if nan_mismatch.any():
            return Comparison(spec.fig_id, False, name, float("nan"), rtol, atol, float("inf"), "NaN pattern differs")
        dev = np.abs(np.nan_to_num(a64 - b64, nan=0.0))
        bound = atol + rtol * np.abs(np.nan_to_num(b64, nan=0.0))
        with np.errstate(divide="ignore", invalid="ignore"):  # a zero bound (atol 0, reference 0): 0/0 is a match
            ratio = float(np.max(np.where(dev == 0, 0.0, dev / bound))) if dev.size else 0.0
        if ratio > worst.ratio:
            worst = Comparison(spec.fig_id, True, name, float(dev.max()) if dev.size else 0.0, rtol, atol, ratio)
    return Comparison(spec.fig_id, worst.ratio <= 1.0, worst.worst_array, worst.max_abs_dev, worst.rtol,
                      worst.atol, max(worst.ratio, 0.0))


def compare_with_reference(fig_id: str, data: FigureData, reference_dir: Path | None = None) -> Comparison:
    """Compare already computed ``data`` of ``fig_id`` with its committed reference."""
    ref = load_reference(fig_id, reference_dir)
    return compare(get_spec(fig_id), data, ref, gpu=on_gpu(), tolerances=calibrated_tolerances(fig_id, reference_dir))


def verify(fig_id: str, reference_dir: Path | None = None) -> Comparison:
    """Regenerate ``fig_id`` and compare it with its committed reference."""
    load_reference(fig_id, reference_dir)  # fail before a long computation if there is no reference
    return compare_with_reference(fig_id, compute(fig_id), reference_dir)


def store_dir() -> Path | None:
    """The figure store named by ``JOMA_FIGURE_STORE`` (None when it is unset or empty)."""
    return Path(os.environ[STORE_ENV]) if os.environ.get(STORE_ENV) else None


def _params_json(fig_id: str) -> Any:
    """The figure's registered params as its manifest records them (after a JSON round trip)."""
    return json.loads(json.dumps({k: _jsonable(v) for k, v in get_spec(fig_id).params.items()}))


def load_stored(fig_id: str, store: Path) -> FigureData | None:
    """``fig_id``'s data kept in ``store`` by :func:`show`, if they were made here as now: with the figure's
    registered params, for the reference variant that applies (e.g. the training precision) and under the same
    oneDNN instruction-set ceiling; None otherwise. A damaged entry raises :class:`CorruptReferenceError`. An entry
    counts once its manifest is there (:func:`write_reference` writes the npz, then the manifest, each atomically),
    so a notebook executed beside the one keeping the figure never sees half an entry."""
    path = reference_path(fig_id, store)
    if not path.with_suffix(".json").exists():
        return None
    data = load_reference(fig_id, store)  # sha256, names, shapes and dtypes against its manifest
    manifest = json.loads(path.with_suffix(".json").read_text())
    if get_spec(fig_id).trained:
        bf16_support()  # sets this machine's oneDNN ceiling in this process, as training the figure would first
    same_isa = manifest.get("environment", {}).get("onednn_isa_limit") == onednn_isa_limit()
    return data if same_isa and manifest.get("params") == _params_json(fig_id) else None


def stored_or_computed(fig_id: str, store: Path | None = None, keep: bool = False) -> tuple[FigureData, bool]:
    """``fig_id``'s data with its registered params, and whether they came from ``store`` (:func:`load_stored`)
    rather than being computed now. With ``keep``, data computed now are kept in ``store`` (with the precisions
    they were trained in), so the next caller with that store draws them instead of computing them again. Opening
    the store removes what killed writers left there an hour ago or more; a damaged entry is computed again (and with
    ``keep`` replaced), with one line on stderr."""
    stored = None
    if store is not None:
        remove_stale_temps(store, older_than=3600.0)  # no write into the store lasts an hour
        try:
            stored = load_stored(fig_id, store)
        except MissingReferenceError:  # the manifest is there, the data are missing, truncated or edited
            print(f"{fig_id}: its entry in the figure store ({reference_path(fig_id, store)}) is damaged; computing it "
                  f"again{' and replacing it' if keep else ''}", file=sys.stderr)
    if stored is not None:
        return stored, True
    with precisions_used() as used:
        data = compute(fig_id)
    if keep and store is not None:
        store.mkdir(parents=True, exist_ok=True)
        write_reference(fig_id, data, store, precision=",".join(sorted(used)))
    return data, False


def registered_data(fig_id: str) -> FigureData:
    """``fig_id``'s data with its registered params, computed once per figure store: drawn from the store
    (``JOMA_FIGURE_STORE``) when kept there, otherwise computed now and, with a store, kept there."""
    return stored_or_computed(fig_id, store_dir(), keep=True)[0]


def show(fig_id: str, out_dir: str | Path = "_generated", **overrides: Any) -> FigureData:
    """Book helper: compute, draw, save downloads, and glue the figure for ``{glue:figure} <fig_id>``.

    The page then writes ``{glue:figure} fig2a`` with ``:name: fig2a`` and a caption that
    links ``_generated/fig2a.csv`` / ``.npz`` / ``.svg``. The glued object is the saved PNG, so
    the page shows exactly the file offered for download, whatever matplotlib backend is active.
    Returns the data so the page can check or quote numbers from it. If the figure needs an external
    input that cannot be had here (:class:`~joma_lib.base.io.InputUnavailableError`) or that fails its check
    (:class:`~joma_lib.base.io.InputCorruptError`), the committed reference data are drawn instead and the page says so.
    With a figure store (``JOMA_FIGURE_STORE``) and no ``overrides``, data already kept there are drawn, and data
    computed here are kept there (:func:`stored_or_computed`). The figure's receipt and citation are written beside
    its downloads, and the receipt into its store entry (:func:`~joma_lib.kit.receipts.keep_receipt`).
    """
    from IPython.display import Image

    source = "overrides" if overrides else "computed"
    try:
        with precisions_used() as used:
            data = compute(fig_id, **overrides) if overrides else registered_data(fig_id)
    except (InputUnavailableError, InputCorruptError) as err:
        if overrides:
            raise
        data, source = load_reference(fig_id), "reference"
        print(f"Note: {err}\nThis figure is therefore drawn from the reference data committed with the book "
              f"(joma_lib/figures/reference/{fig_id}.npz), not recomputed here.")
    png, _, npz = save_outputs(fig_id, draw(fig_id, data), data, Path(out_dir))[:3]
    store = None if source == "reference" else store_dir()  # the manifest of the data's origin, if any: the receipt's
    origin = reference_path(fig_id, store).with_suffix(".json") if store or source == "reference" else None
    keep_receipt(fig_id, data, npz, source, {**_environment(), "precision": ",".join(sorted(used))}, origin,
                 compare=lambda: compare_with_reference(fig_id, data))
    glue(fig_id, Image(filename=str(png)), display=False)
    return data
