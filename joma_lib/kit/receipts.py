"""A figure's receipt: what made the figure a page shows, written with its data, never typed.

When a page shows a figure (:func:`joma_lib.kit.harness.show`), the harness writes the figure's receipt beside
its downloads (``_generated/<fig_id>.receipt.json``) and into the manifest of the figure store's entry
(``"receipt"``), and its citation (:mod:`joma_lib.kit.citation`) beside them (``<fig_id>.cite.json``). The book
shows both in a collapsed block under the figure (``_ext/sphinx_figures.py``); ``python -m joma_lib.figures receipt
<fig_id>`` prints the receipt kept in the store with the same lines (:func:`receipt_lines`).

A receipt gives the figure's id and the paper's number; the companion's version and git commit; the sha256 of the
figure's data file (the ``.npz`` offered for download); the versions of torch, numpy and scipy; the device and
precision that computed the data; where the data came from (computed, a stored run, or the committed reference);
the largest deviation from the committed reference with its tolerance, as ``verify`` measures it; and the date.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from joma_lib.base.cpu import cpu_identity
from joma_lib.base.io import atomic_path
from joma_lib.kit.citation import cite, git_commit, project
from joma_lib.kit.registry import get_spec

RECEIPT_SUFFIX = "receipt.json"
CITE_SUFFIX = "cite.json"
SOURCES = {
    "computed": "computed by the code of this version",
    "stored-run": "read from a stored run (results committed with the code, in joma_lib/lm/results/ or "
                  "joma_lib/theory/table1/results/: a run too long to retrain on every check), drawn by this version",
    "reference": "drawn from the committed reference data: what it needs (data or a model out of reach, or bf16 at "
                 "speed) could not be had where it was built",
    "overrides": "computed with parameters other than the registered ones (not compared with the reference)",
}
"""Where a figure's data came from (the receipt's ``source``) and what the receipt says about it."""


def device_name(device: str) -> str:
    """``device`` (``cpu``/``cuda``, as a manifest records it) with the model of this machine's CPU or GPU."""
    if device == "cuda":
        import torch

        return f"GPU: {torch.cuda.get_device_name(0)}"
    return f"CPU: {cpu_identity().model}"


def make_receipt(fig_id: str, data_file: Path, source: str, environment: Mapping[str, str],
                 deviation: Mapping[str, Any] | None, dtypes: list[str], date: str | None = None) -> dict[str, Any]:
    """The receipt of ``fig_id`` whose data were saved in ``data_file``.

    ``source`` is a key of :data:`SOURCES`; ``environment`` the manifest's environment of the run that computed the
    data (versions, ``device``, ``precision``); ``deviation`` the fields of the comparison with the reference
    (None where there is none to compare with); ``dtypes`` the data's array dtypes; ``date`` when the data were
    computed (default: now, UTC).
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {sorted(SOURCES)}, got {source!r}")
    spec = get_spec(fig_id)
    numbers = f"numbers in {', '.join(sorted(set(dtypes)))}"
    precision = environment.get("precision") or (f"trained beforehand, read back here; {numbers}"
                                                  if source == "stored-run" else f"no model trained; {numbers}")
    return {
        "fig_id": fig_id,
        "title": spec.title,
        "paper_ref": spec.paper_ref,
        "companion_version": project().version,
        "git_commit": git_commit(),
        "data_file": data_file.name,
        "sha256": hashlib.sha256(data_file.read_bytes()).hexdigest(),
        "versions": {name: environment.get(name, "?") for name in ("torch", "numpy", "scipy")},
        "device": device_name(environment.get("device", "cpu")),
        "precision": precision,
        "source": source,
        "deviation": dict(deviation) if deviation is not None else None,
        "date": date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _deviation_line(deviation: Mapping[str, Any] | None) -> str:
    if deviation is None:
        return "not compared (no reference applies to these data)"
    if "error" in deviation:
        return f"not measured: {deviation['error']}"
    verdict = "within" if deviation["passed"] else "BEYOND"
    return (f"{deviation['max_abs_dev']:.3g} (array {deviation['worst_array']}), {verdict} its tolerance "
            f"rtol {deviation['rtol']:.1g}, atol {deviation['atol']:.1g} (deviation / tolerance "
            f"{deviation['ratio']:.3g})")


def receipt_lines(receipt: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The receipt as ``(label, value)`` lines: printed by the command line, shown on the page."""
    versions = receipt["versions"]
    return [
        ("figure", f"{receipt['fig_id']} ({receipt['paper_ref']}): {receipt['title']}"),
        ("companion", f"version {receipt['companion_version']}, commit {receipt['git_commit']}"),
        ("data file", f"{receipt['data_file']}, sha256 {receipt['sha256']}"),
        ("libraries", f"torch {versions['torch']}, numpy {versions['numpy']}, scipy {versions['scipy']}"),
        ("computed on", f"{receipt['device']}; precision: {receipt['precision']}"),
        ("source", SOURCES[receipt["source"]]),
        ("largest deviation from the reference", _deviation_line(receipt["deviation"])),
        ("date", receipt["date"]),
    ]


def receipt_text(receipt: Mapping[str, Any]) -> str:
    """The receipt as plain text, one ``label: value`` per line."""
    return "\n".join(f"{label}: {value}" for label, value in receipt_lines(receipt))


def write_receipt(receipt: Mapping[str, Any], out_dir: Path, manifest: Path | None = None) -> Path:
    """Write ``receipt`` (with its display lines) and the figure's citation beside its downloads in ``out_dir``,
    and into the figure store's ``manifest`` when one is given; return the receipt's path."""
    fig_id = receipt["fig_id"]
    record = {**receipt, "lines": receipt_lines(receipt)}
    path = out_dir / f"{fig_id}.{RECEIPT_SUFFIX}"
    for target, text in ((path, json.dumps(record, indent=2, sort_keys=True)),
                         (out_dir / f"{fig_id}.{CITE_SUFFIX}", json.dumps(cite(fig_id).as_json(), indent=2))):
        with atomic_path(target) as tmp:
            tmp.write_text(text + "\n")
    if manifest is not None and manifest.exists():
        kept = json.loads(manifest.read_text())
        with atomic_path(manifest) as tmp:
            tmp.write_text(json.dumps({**kept, "receipt": dict(receipt)}, indent=2, sort_keys=True) + "\n")
    return path


def kept_receipt(manifest: Path) -> dict[str, Any] | None:
    """The receipt kept in a figure store's manifest, or None (no manifest, or none written yet)."""
    if not manifest.exists():
        return None
    receipt = json.loads(manifest.read_text()).get("receipt")
    return dict(receipt) if isinstance(receipt, dict) else None


def keep_receipt(fig_id: str, data: Mapping[str, Any], data_file: Path, source: str, environment: Mapping[str, str],
                 origin: Path | None, compare: Callable[[], Any]) -> Path:
    """Make and write (:func:`write_receipt`) the receipt of the figure a page shows; return its path.

    Called by :func:`joma_lib.kit.harness.show` with how it got ``data`` (``source``: ``computed``, ``reference`` or
    ``overrides``), this machine's ``environment``, the manifest of the data's origin (``origin``: the figure
    store's entry, or the committed reference's json for ``reference``; None without one) and ``compare``, which
    compares ``data`` with the reference as ``verify`` does. Data that come with a manifest keep the device,
    precision, versions and date of the run that computed them (its kept receipt, else its manifest); the
    deviation is measured now. The receipt goes into the store's manifest too (never into a reference's)."""
    if source == "computed" and get_spec(fig_id).stored_run:
        source = "stored-run"
    kept_manifest = json.loads(origin.read_text()) if origin is not None and origin.exists() else None
    if kept_manifest is not None and source != "overrides":
        environment = kept_manifest.get("environment", environment)
    deviation = None
    if source in ("computed", "stored-run"):
        try:
            deviation = {k: v for k, v in asdict(compare()).items() if k not in ("fig_id", "message")}
        except RuntimeError as err:  # no usable reference (MissingReferenceError): said in the receipt
            deviation = {"error": str(err)}
    store_manifest = origin if source in ("computed", "stored-run") else None
    date = None
    if kept_manifest is not None and store_manifest is not None:
        date = datetime.datetime.fromtimestamp(store_manifest.stat().st_mtime, datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC")
    receipt = make_receipt(fig_id, data_file, source, {k: v for k, v in environment.items() if v}, deviation,
                           [a.dtype.name for a in map(np.asarray, data.values()) if a.dtype.kind in "fciub"],
                           date=date)
    kept = kept_receipt(store_manifest) if store_manifest is not None else None
    if kept is not None:  # the run that computed the data, as its receipt says
        receipt.update({k: kept[k] for k in ("device", "precision", "versions", "source", "date") if k in kept})
    return write_receipt(receipt, data_file.parent, store_manifest)
