"""The authors' WikiText-2 sweeps behind paper Figs. 6 and 8, and the run table they share with our re-run.

The data are the sweep results that Tian et al. published with the paper's official code
(github.com/facebookresearch/luckmatters, branch ``yuandong3``, folder ``ssl/real-dataset/joma/``), licensed
**CC BY-NC 4.0** (attribution, non-commercial; copyright the paper's authors). This module never redistributes
them: :func:`official_runs` finds the two ``.pt`` files in a directory the user names (argument, or the
environment variable ``JOMA_OFFICIAL_DIR``), in ``../shared/joma_official/`` next to a development checkout, or in
the user cache (``$JOMA_CACHE``, default ``~/.cache/joma_companion``), and otherwise downloads them there. Every
file is checked against its sha256 and read with ``torch.load(..., weights_only=True)`` (tensors and plain types
only, never code).

The public data structure is :class:`SweepRuns`: ``R`` training runs with ``C`` checkpoints each, as plain numpy
arrays (documented on the class). Our own re-run (``joma_lib.lm``) writes the same structure, so that Figs. 6 and 8
are drawn from either source by the same code. The aggregation used by the paper's panels is
:func:`seed_average` (mean over seeds of one ``(nlayers, lr)`` cell), whose :attr:`SeedAverage.min_val_loss`
(minimum over checkpoints of the seed-averaged validation loss) is the number in the panel titles.
"""

from __future__ import annotations

import hashlib
import http.client
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from joma_lib.base.io import InputCorruptError, InputUnavailableError, cache_dir, fetch_url
from joma_lib.base.startup import declare_env
from joma_lib.base.validation import check_float, check_int

SOURCE_URL = "https://github.com/facebookresearch/luckmatters/raw/yuandong3/ssl/real-dataset/joma/"
LICENSE = "CC BY-NC 4.0"
ATTRIBUTION = ("WikiText-2 sweep results by Y. Tian, Y. Wang, Z. Zhang, B. Chen and S. Du (JoMA, ICLR 2024), "
               "github.com/facebookresearch/luckmatters (branch yuandong3, ssl/real-dataset/joma), "
               f"licensed {LICENSE}")

#: file name -> sha256 of the published file.
OFFICIAL_FILES: dict[str, str] = {
    "wikitext2_multilayer_lr.pt": "bdfa95a7e464acc7fef6fdaac2726b9e9de78199f770ddd428f84a0d898bbe00",
    "wikitext2_multilayer_lr_small.pt": "3777d2201f980e39a4ba1b8d8665c8fef7333141b30b10d6934023ec234890f8",
}

#: ``../shared/joma_official`` relative to the repository root (used by the tests and CI of a checkout).
CHECKOUT_DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "joma_official"

ARRAY_NAMES = ("nlayers", "lr", "seed", "minibatch", "val_loss", "attn_entropy")


class OfficialDataError(RuntimeError):
    """The authors' files could not be found, fetched or checked."""


class OfficialDataMissing(OfficialDataError, InputUnavailableError):
    """The authors' files are in none of the places searched and could not be downloaded."""


class ChecksumError(OfficialDataError, InputCorruptError):
    """A file's sha256 differs from the published one (corrupted, truncated or a different file)."""


# --------------------------------------------------------------------------------------------------------------
# The run table


@dataclass(frozen=True, eq=False)
class SweepRuns:
    """``R`` runs with ``C`` checkpoints each: the plain arrays Figs. 6 and 8 are drawn from.

    Attributes (numpy arrays; the constructor converts and checks them):
        nlayers: ``[R]`` int, number of Transformer layers of each run.
        lr: ``[R]`` float, the (constant) Adam learning rate.
        seed: ``[R]`` int, the run's random seed.
        minibatch: ``[R, C]`` int, training steps at each checkpoint, strictly increasing along a row.
        val_loss: ``[R, C]`` float, validation cross-entropy in nats per token.
        attn_entropy: ``[R, C, Lmax]`` float, attention entropy of each layer in nats (mean over query rows of
            ``-sum_j a_ij log a_ij``); NaN for layers ``l >= nlayers[r]``, finite and ``>= 0`` below.
    """

    nlayers: np.ndarray
    lr: np.ndarray
    seed: np.ndarray
    minibatch: np.ndarray
    val_loss: np.ndarray
    attn_entropy: np.ndarray

    def __post_init__(self) -> None:
        arrays = {
            "nlayers": np.asarray(self.nlayers, dtype=np.int64),
            "lr": np.asarray(self.lr, dtype=np.float64),
            "seed": np.asarray(self.seed, dtype=np.int64),
            "minibatch": np.asarray(self.minibatch, dtype=np.int64),
            "val_loss": np.asarray(self.val_loss, dtype=np.float64),
            "attn_entropy": np.asarray(self.attn_entropy, dtype=np.float64),
        }
        for name, array in arrays.items():
            object.__setattr__(self, name, array)
        _check_runs(**arrays)

    @property
    def n_runs(self) -> int:
        """``R``, the number of runs."""
        return int(self.nlayers.shape[0])

    def as_arrays(self) -> dict[str, np.ndarray]:
        """The six arrays by name (for ``np.savez``; :meth:`from_arrays` reads them back)."""
        return {name: getattr(self, name) for name in ARRAY_NAMES}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, Any]) -> SweepRuns:
        """Build from a mapping holding the six arrays (e.g. an opened ``.npz``)."""
        missing = [name for name in ARRAY_NAMES if name not in arrays]
        if missing:
            raise ValueError(f"arrays is missing {missing}; a SweepRuns needs {list(ARRAY_NAMES)}")
        return cls(**{name: np.asarray(arrays[name]) for name in ARRAY_NAMES})

    def configs(self) -> list[tuple[int, float]]:
        """The distinct ``(nlayers, lr)`` cells, sorted."""
        return sorted({(int(n), float(lr)) for n, lr in zip(self.nlayers, self.lr)})


def _check_runs(nlayers: np.ndarray, lr: np.ndarray, seed: np.ndarray, minibatch: np.ndarray,
                val_loss: np.ndarray, attn_entropy: np.ndarray) -> None:
    """Shape and value checks of a :class:`SweepRuns` (ValueError naming the array)."""
    if nlayers.ndim != 1 or nlayers.size == 0:
        raise ValueError(f"nlayers must be a non-empty 1-D array [R], got shape {nlayers.shape}")
    n_runs = nlayers.shape[0]
    for name, array in (("lr", lr), ("seed", seed)):
        if array.shape != (n_runs,):
            raise ValueError(f"{name} must have shape [R]=({n_runs},), got {array.shape}")
    if minibatch.ndim != 2 or minibatch.shape[0] != n_runs or minibatch.shape[1] == 0:
        raise ValueError(f"minibatch must have shape [R, C] with R={n_runs} and C >= 1, got {minibatch.shape}")
    n_ckpt = minibatch.shape[1]
    if val_loss.shape != (n_runs, n_ckpt):
        raise ValueError(f"val_loss must have shape [R, C]=({n_runs}, {n_ckpt}), got {val_loss.shape}")
    if attn_entropy.ndim != 3 or attn_entropy.shape[:2] != (n_runs, n_ckpt):
        raise ValueError(f"attn_entropy must have shape [R, C, Lmax] with R={n_runs}, C={n_ckpt}, "
                         f"got {attn_entropy.shape}")
    if nlayers.min() < 1 or nlayers.max() > attn_entropy.shape[2]:
        raise ValueError(f"nlayers must lie in [1, Lmax={attn_entropy.shape[2]}], got {sorted(set(nlayers.tolist()))}")
    if not (np.all(np.isfinite(lr)) and np.all(lr > 0)):
        raise ValueError("lr must be finite and > 0 for every run")
    if np.any(np.diff(minibatch, axis=1) <= 0):
        raise ValueError("minibatch must be strictly increasing along each run (padding such as -1 is not allowed: "
                         "trim runs of different lengths to their common checkpoints)")
    if not np.all(np.isfinite(val_loss)):
        raise ValueError("val_loss must be finite")
    present = np.arange(attn_entropy.shape[2])[None, None, :] < nlayers[:, None, None]
    present = np.broadcast_to(present, attn_entropy.shape)
    if not np.all(np.isfinite(attn_entropy[present])) or np.any(attn_entropy[present] < 0):
        raise ValueError("attn_entropy must be finite and >= 0 for every layer l < nlayers of a run")
    if not np.all(np.isnan(attn_entropy[~present])):
        raise ValueError("attn_entropy must be NaN for the layers l >= nlayers of a run")


# --------------------------------------------------------------------------------------------------------------
# Aggregation over seeds


@dataclass(frozen=True, eq=False)
class EntropySummary:
    """Per-layer numbers of one seed-averaged entropy curve (arrays of length ``nlayers``).

    ``bounce = final - minimum``; ``interior`` says whether the minimum lies strictly inside the run (neither the
    first nor the last checkpoint), i.e. whether the curve drops and then rises again.
    """

    initial: np.ndarray
    minimum: np.ndarray
    argmin_minibatch: np.ndarray
    final: np.ndarray
    bounce: np.ndarray
    interior: np.ndarray


@dataclass(frozen=True, eq=False)
class SeedAverage:
    """One ``(nlayers, lr)`` cell of a sweep, averaged over its seeds.

    Attributes:
        nlayers, lr: the cell.
        seeds: ``[S]`` the seeds that were averaged.
        minibatch: ``[C]`` checkpoint steps (common to all seeds).
        val_loss: ``[C]`` seed-mean validation loss.
        attn_entropy: ``[C, nlayers]`` seed-mean attention entropy per layer.
    """

    nlayers: int
    lr: float
    seeds: np.ndarray
    minibatch: np.ndarray
    val_loss: np.ndarray
    attn_entropy: np.ndarray

    @property
    def min_val_loss(self) -> float:
        """Minimum over checkpoints of the seed-averaged validation loss: the number in the paper's panel titles."""
        return float(self.val_loss.min())

    def entropy_summary(self) -> EntropySummary:
        """Initial value, minimum (and where), final value and bounce of each layer's entropy curve."""
        return summarize_entropy(self.minibatch, self.attn_entropy)


def summarize_entropy(minibatch: np.ndarray, attn_entropy: np.ndarray) -> EntropySummary:
    """The :class:`EntropySummary` of entropy curves ``attn_entropy`` ``[C, nlayers]`` at steps ``minibatch``
    ``[C]``."""
    e = np.asarray(attn_entropy, dtype=float)
    steps = np.asarray(minibatch)
    if e.ndim != 2 or steps.shape != (e.shape[0],) or e.shape[0] < 1:
        raise ValueError(f"attn_entropy must be [C, nlayers] and minibatch [C], got {e.shape} and {steps.shape}")
    argmin = np.argmin(e, axis=0)
    return EntropySummary(
        initial=e[0].copy(),
        minimum=e.min(axis=0),
        argmin_minibatch=steps[argmin],
        final=e[-1].copy(),
        bounce=e[-1] - e.min(axis=0),
        interior=(argmin > 0) & (argmin < e.shape[0] - 1),
    )


def seed_average(runs: SweepRuns, nlayers: int, lr: float) -> SeedAverage:
    """Average the runs of one ``(nlayers, lr)`` cell over their seeds (``lr`` matched to a relative 1e-6).

    This is the paper's aggregation for Figs. 6 and 8: curves and validation loss are averaged over seeds, then
    the panel title takes the minimum over checkpoints of the averaged loss (:attr:`SeedAverage.min_val_loss`).
    """
    nlayers = check_int("nlayers", nlayers, 1)
    lr = check_float("lr", lr, 0.0, low_open=True)
    mask = (runs.nlayers == nlayers) & np.isclose(runs.lr, lr, rtol=1e-6, atol=0.0)
    if not mask.any():
        cells = ", ".join(f"({n}, {r:g})" for n, r in runs.configs())
        raise ValueError(f"no run with nlayers={nlayers} and lr={lr:g}; available (nlayers, lr): {cells}")
    steps = runs.minibatch[mask]
    if np.any(steps != steps[0]):
        raise ValueError(f"the seeds of (nlayers={nlayers}, lr={lr:g}) have different checkpoint steps")
    return SeedAverage(
        nlayers=nlayers,
        lr=lr,
        seeds=runs.seed[mask],
        minibatch=steps[0],
        val_loss=runs.val_loss[mask].mean(axis=0),
        attn_entropy=runs.attn_entropy[mask][:, :, :nlayers].mean(axis=0),
    )


# --------------------------------------------------------------------------------------------------------------
# Finding, fetching and checking the published files


OFFICIAL_DIR_ENV = "JOMA_OFFICIAL_DIR"


def official_dir_env() -> Path | None:
    """The folder ``$JOMA_OFFICIAL_DIR`` names (None when unset); one that is not an existing folder is a ValueError
    naming the variable (a typo there would otherwise skip the figures that need the files, without a word)."""
    value = os.environ.get(OFFICIAL_DIR_ENV)
    if not value:
        return None
    if not Path(value).is_dir():
        raise ValueError(f"{OFFICIAL_DIR_ENV} must name an existing folder (of the authors' published runs), got "
                         f"{value!r}, which is {'a file' if Path(value).exists() else 'missing'}")
    return Path(value)


declare_env(OFFICIAL_DIR_ENV, "an existing folder", lambda _: official_dir_env())


def search_dirs() -> list[Path]:
    """Directories searched when none is named: ``$JOMA_OFFICIAL_DIR``, the checkout's shared copy, the cache."""
    named = official_dir_env()
    return ([named] if named else []) + [CHECKOUT_DATA_DIR, cache_dir()]


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def check_sha256(path: Path, expected: str) -> Path:
    """Return ``path`` if its sha256 is ``expected``; raise :class:`ChecksumError` otherwise."""
    actual = sha256_of(path)
    if actual != expected:
        raise ChecksumError(f"{path} has sha256 {actual}, expected {expected}: the file is corrupted or not the "
                            "authors' published file; delete it and fetch it again")
    return path


#: url -> why its download failed; a failed download is not tried again in the same process.
_FAILED_DOWNLOADS: dict[str, str] = {}


def forget_failed_downloads() -> None:
    """Allow downloads that failed earlier in this process to be tried again (e.g. after reconnecting)."""
    _FAILED_DOWNLOADS.clear()


def download(url: str, dest: Path, sha256: str, timeout: float = 10.0, deadline: float = 120.0) -> Path:
    """Fetch ``url`` into ``dest`` atomically (temporary file, checksum, rename) and return ``dest``.

    Fails fast (:func:`joma_lib.base.io.fetch_url`): ``timeout`` seconds to connect and for each read, ``deadline``
    seconds for the whole exchange (connect, headers and body, so a server that trickles bytes anywhere is cut
    off too), no retries. Any network failure becomes an :class:`OfficialDataMissing` that says how to supply the
    files offline, and is remembered: the same url is not tried again in this process
    (:func:`forget_failed_downloads` resets that). ``dest`` is never half-written and no ``.part`` file outlives a
    failed call; the ``.part`` file of a killed download is removed by a later call.
    """
    timeout = check_float("timeout", timeout, 0.0, low_open=True)
    deadline = check_float("deadline", deadline, 0.0, low_open=True)
    if url in _FAILED_DOWNLOADS:
        raise OfficialDataMissing(f"could not download {url} earlier in this process ({_FAILED_DOWNLOADS[url]}); "
                                  f"not trying again. {_OFFLINE_HINT}")

    def check(part: Path) -> None:
        actual = sha256_of(part)
        if actual != sha256:
            raise ChecksumError(f"{url} served a file with sha256 {actual}, expected {sha256}; nothing was saved")

    try:
        return fetch_url(url, Path(dest), timeout, deadline, check)
    except (http.client.HTTPException, OSError, ValueError) as err:
        _FAILED_DOWNLOADS[url] = str(err)
        raise OfficialDataMissing(f"could not download {url} ({err}). {_OFFLINE_HINT}") from err


_OFFLINE_HINT = (f"Offline? Copy the authors' files {sorted(OFFICIAL_FILES)} into a directory and pass it as "
                 "`directory=` or set JOMA_OFFICIAL_DIR")


def locate(name: str, directory: str | Path | None = None, *, download_missing: bool = True,
           timeout: float = 10.0) -> Path:
    """Path of the checked official file ``name``.

    With ``directory`` the file must be there. Otherwise :func:`search_dirs` is searched in order; a copy whose
    checksum is wrong raises :class:`ChecksumError`, except in the cache, where it is fetched again. If no copy
    exists and ``download_missing`` is true, the file is downloaded into :func:`cache_dir`.
    """
    if name not in OFFICIAL_FILES:
        raise ValueError(f"name must be one of {sorted(OFFICIAL_FILES)}, got {name!r}")
    expected = OFFICIAL_FILES[name]
    if directory is not None:
        path = Path(directory) / name
        if not path.is_file():
            raise OfficialDataMissing(f"{path} does not exist; download it from {SOURCE_URL}{name}")
        return check_sha256(path, expected)
    cache = cache_dir() / name
    for folder in search_dirs():
        path = folder / name
        if path.is_file():
            if path != cache:
                return check_sha256(path, expected)
            if sha256_of(path) == expected:
                return path
    if not download_missing:
        raise OfficialDataMissing(f"{name} is in none of {[str(d) for d in search_dirs()]} and downloading is off; "
                                "pass `directory=` or set JOMA_OFFICIAL_DIR")
    return download(SOURCE_URL + name, cache, expected, timeout=timeout)


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The list of run records in one published ``.pt`` file, loaded with ``weights_only=True`` (no code runs)."""
    import pickle
    import zipfile

    import torch

    try:
        records = torch.load(Path(path), map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        first = " ".join(str(err).split()).split(". ")[0][:120]  # torch's first sentence, without its advice
        raise ValueError(f"{path} is not a torch file of run records ({type(err).__name__}: {first}); fetch the "
                         "published file again") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{path} does not hold a list of run records (dicts)")
    return records


RECORD_FIELDS = ("nlayers", "lr", "seed", "keys", "this_entropies", "this_val_loss")


def records_to_runs(records: Sequence[Mapping[str, Any]]) -> SweepRuns:
    """Convert the authors' run records to a :class:`SweepRuns`, runs sorted by ``(nlayers, lr, seed)``.

    Each record holds its configuration (``nlayers``, ``lr``, ``seed``, ...), the checkpoint steps ``keys``
    ``[C]``, ``this_entropies`` ``[C, nlayers]`` and ``this_val_loss`` ``[C]``.
    """
    if not records:
        raise ValueError("records is empty")
    for i, record in enumerate(records):
        missing = [key for key in RECORD_FIELDS if key not in record]
        if missing:
            raise ValueError(f"record {i} lacks the fields {missing}")
    order = sorted(range(len(records)),
                   key=lambda i: (int(records[i]["nlayers"]), float(records[i]["lr"]), int(records[i]["seed"])))
    records = [records[i] for i in order]
    n_ckpt = len(records[0]["keys"])
    lmax = max(int(r["nlayers"]) for r in records)
    entropy = np.full((len(records), n_ckpt, lmax), np.nan)
    for i, record in enumerate(records):
        values = np.asarray(record["this_entropies"], dtype=np.float64)
        if len(record["keys"]) != n_ckpt or values.shape != (n_ckpt, int(record["nlayers"])):
            raise ValueError(f"record {i} has {len(record['keys'])} checkpoints and entropies of shape "
                             f"{values.shape}; expected {n_ckpt} and ({n_ckpt}, {record['nlayers']})")
        entropy[i, :, :values.shape[1]] = values
    return SweepRuns(
        nlayers=np.asarray([r["nlayers"] for r in records], dtype=np.int64),
        lr=np.asarray([r["lr"] for r in records], dtype=np.float64),
        seed=np.asarray([r["seed"] for r in records], dtype=np.int64),
        minibatch=np.asarray([list(r["keys"]) for r in records], dtype=np.int64),
        val_loss=np.asarray([np.asarray(r["this_val_loss"], dtype=np.float64) for r in records], dtype=np.float64),
        attn_entropy=entropy,
    )


def official_runs(directory: str | Path | None = None, *, download_missing: bool = True,
                  timeout: float = 10.0) -> SweepRuns:
    """All runs of both published sweeps (lr 1e-6 ... 1e-2; 1-10 layers; seeds 1-3) as one :class:`SweepRuns`.

    ``directory`` names where the two ``.pt`` files are; by default they are searched for (and, online,
    downloaded) as described in :func:`locate`.
    """
    records: list[dict[str, Any]] = []
    for name in OFFICIAL_FILES:
        records += read_records(locate(name, directory, download_missing=download_missing, timeout=timeout))
    return records_to_runs(records)
