"""Regenerate, save, verify and show registry figures.

The three ways a figure is used all go through :func:`compute`:

* the book page calls :func:`show` (compute, draw, save PNG/SVG/npz/CSV for download,
  glue the figure for a numbered, citable caption);
* ``python -m joma_lib.figures make`` saves the same files anywhere;
* ``python -m joma_lib.figures verify`` compares the data with the committed
  reference (``joma_lib/figures/reference/<fig_id>.npz`` + ``.json``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from joma_lib.device import on_gpu
from joma_lib.io import InputUnavailableError, atomic_path, write_npz
from joma_lib.figures.registry import FigureData, FigureSpec, get_spec
from joma_lib.figures.style import figure_style

REFERENCE_DIR = Path(__file__).with_name("reference")


class MissingReferenceError(RuntimeError):
    """Raised when a figure has no committed reference data to verify against."""


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

    ``index`` is the comma-joined multi-index of the element, empty for scalars, so
    every array of the figure fits one file that any spreadsheet opens.
    """
    with atomic_path(path) as tmp:
        with open(tmp, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["array", "index", "value"])
            for name, array in data.items():
                for index, value in np.ndenumerate(array):
                    writer.writerow([name, ",".join(map(str, index)), repr(value.item())])


def save_outputs(fig_id: str, fig: Figure, data: FigureData, out_dir: Path) -> list[Path]:
    """Write ``<fig_id>.png``, ``.svg``, ``.npz`` and ``.csv`` into ``out_dir``; return the paths."""
    out_dir = Path(out_dir)
    paths = [out_dir / f"{fig_id}.{ext}" for ext in ("png", "svg", "npz", "csv")]
    with figure_style():
        for path in paths[:2]:
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=path.suffix[1:], bbox_inches="tight", metadata=_image_metadata(path))
    write_npz(paths[2], data)
    write_csv(paths[3], data)
    return paths


def _image_metadata(path: Path) -> dict[str, Any]:
    """Metadata that keeps saved images free of timestamps (byte-stable SVG/PNG)."""
    return {"Date": None} if path.suffix == ".svg" else {}


def _environment() -> dict[str, str]:
    import scipy
    import torch

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "torch": torch.__version__,
        "matplotlib": matplotlib.__version__,
        "device": "cuda" if on_gpu() else "cpu",
    }


def update_reference(fig_id: str, reference_dir: Path | None = None) -> Path:
    """Regenerate ``fig_id``'s data and store it as the committed reference (npz + json manifest)."""
    spec = get_spec(fig_id)
    data = compute(fig_id)
    npz_path = Path(reference_dir or REFERENCE_DIR) / f"{fig_id}.npz"
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
        "environment": _environment(),
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
    """The committed reference data of ``fig_id``; :class:`MissingReferenceError` if there is none."""
    path = Path(reference_dir or REFERENCE_DIR) / f"{fig_id}.npz"
    if not path.exists():
        raise MissingReferenceError(
            f"no reference data for {fig_id!r} at {path}; run `python -m joma_lib.figures update {fig_id}` and commit it")
    with np.load(path, allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


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


def compare(spec: FigureSpec, new: FigureData, ref: FigureData, gpu: bool = False) -> Comparison:
    """Compare every array of ``new`` with ``ref`` under the spec's per-array tolerances."""
    if set(new) != set(ref):
        missing, extra = sorted(set(ref) - set(new)), sorted(set(new) - set(ref))
        return Comparison(spec.fig_id, False, "-", float("nan"), 0.0, 0.0, float("inf"),
                          f"array names differ (missing {missing}, unexpected {extra})")
    worst = Comparison(spec.fig_id, True, "-", 0.0, 0.0, 0.0, -1.0)
    for name in sorted(ref):
        a, b = np.asarray(new[name]), np.asarray(ref[name])
        rtol, atol = spec.tolerance(name).for_device(gpu)
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
        ratio = float(np.max(dev / bound)) if dev.size else 0.0
        if ratio > worst.ratio:
            worst = Comparison(spec.fig_id, True, name, float(dev.max()) if dev.size else 0.0, rtol, atol, ratio)
    return Comparison(spec.fig_id, worst.ratio <= 1.0, worst.worst_array, worst.max_abs_dev, worst.rtol,
                      worst.atol, max(worst.ratio, 0.0))


def verify(fig_id: str, reference_dir: Path | None = None) -> Comparison:
    """Regenerate ``fig_id`` and compare it with its committed reference."""
    spec = get_spec(fig_id)
    ref = load_reference(fig_id, reference_dir)
    return compare(spec, compute(fig_id), ref, gpu=on_gpu())


def show(fig_id: str, out_dir: str | Path = "_generated", **overrides: Any) -> FigureData:
    """Book helper: compute, draw, save downloads, and glue the figure for ``{glue:figure} <fig_id>``.

    The page then writes ``{glue:figure} fig2a`` with ``:name: fig2a`` and a caption that
    links ``_generated/fig2a.csv`` / ``.npz`` / ``.svg``. The glued object is the saved PNG, so
    the page shows exactly the file offered for download, whatever matplotlib backend is active.
    Returns the data so the page can check or quote numbers from it. If the figure needs an external
    input that cannot be had here (:class:`~joma_lib.io.InputUnavailableError`), the committed reference
    data are drawn instead and the page says so.
    """
    from IPython.display import Image
    from myst_nb import glue

    try:
        data = compute(fig_id, **overrides)
    except InputUnavailableError as err:
        if overrides:
            raise
        data = load_reference(fig_id)
        print(f"Note: {err}\nThis figure is therefore drawn from the reference data committed with the book "
              f"(joma_lib/figures/reference/{fig_id}.npz), not recomputed here.")
    png = save_outputs(fig_id, draw(fig_id, data), data, Path(out_dir))[0]
    glue(fig_id, Image(filename=str(png)), display=False)
    return data
