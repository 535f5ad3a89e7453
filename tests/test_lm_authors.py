"""The authors' WikiText-2 sweeps: fetching, checking, loading, aggregating, and the numbers of the runs.

Uses the local copy in ``$JOMA_OFFICIAL_DIR`` or ``../shared/joma_official/`` (relative to the repository root);
tests that need it are skipped with the reason when it is absent. Nothing here touches the network except one
deliberately unroutable address, which must fail within the 5 s budget.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from joma_lib.lm import authors
from joma_lib.lm.authors import (
    OFFICIAL_FILES,
    ChecksumError,
    OfficialDataError,
    SweepRuns,
    locate,
    official_runs,
    read_records,
    seed_average,
    summarize_entropy,
)

SMALL = "wikitext2_multilayer_lr_small.pt"


@pytest.fixture(autouse=True)
def offline_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No hub access, a private cache so no test reads or writes the user's, no download failures remembered."""
    monkeypatch.setattr(authors, "_FAILED_DOWNLOADS", {})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("JOMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("JOMA_OFFICIAL_DIR", raising=False)


@pytest.fixture(scope="module")
def runs(official_dir: Path) -> SweepRuns:
    return official_runs(official_dir, download_missing=False)


# ---------------------------------------------------------------------------------------------- the paper's numbers


def test_drop_and_bounce_at_lr_1e4(runs: SweepRuns) -> None:
    one = seed_average(runs, 1, 1e-4).entropy_summary()
    assert one.argmin_minibatch[0] <= 3000
    assert one.initial[0] - one.minimum[0] >= 0.9
    assert one.bounce[0] >= 0.6
    ten = seed_average(runs, 10, 1e-4).entropy_summary()
    assert np.all(ten.bounce[3:] >= 0.2)  # the upper layers of a deep model bounce back
    assert np.all(ten.bounce[:2] <= 0.05)  # the lowest two do not


def test_lr_extremes(runs: SweepRuns) -> None:
    for lr in (1e-3, 1e-2):  # layer 0 collapses onto a single token
        assert seed_average(runs, 5, lr).attn_entropy[-1, 0] < 0.05
    slow = seed_average(runs, 5, 1e-6)  # too slow to reach the bounce: every minimum is at the last checkpoint
    assert np.all(slow.entropy_summary().argmin_minibatch == slow.minibatch[-1])


def test_conversion_agrees_with_the_curated_npz(official_dir: Path, runs: SweepRuns) -> None:
    """The independent numpy conversion shipped next to the .pt files holds the same runs."""
    if not (official_dir / "wikitext2_entropy_sweep.npz").is_file():
        pytest.skip(f"no wikitext2_entropy_sweep.npz in {official_dir}")
    with np.load(official_dir / "wikitext2_entropy_sweep.npz") as npz:
        order = np.lexsort((npz["seed"], npz["lr"], npz["nlayers"]))
        for name in authors.ARRAY_NAMES:
            np.testing.assert_allclose(getattr(runs, name), npz[name][order], rtol=1e-7, atol=0)


# ---------------------------------------------------------------------------------------------- files and network

def test_sha256_rejects_a_corrupted_file(official_dir: Path, tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(official_dir / SMALL, good / SMALL)
    assert locate(SMALL, good) == good / SMALL
    bad = tmp_path / "bad"
    bad.mkdir()
    blob = bytearray((official_dir / SMALL).read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (bad / SMALL).write_bytes(bytes(blob))
    with pytest.raises(ChecksumError, match="corrupted"):
        locate(SMALL, bad)


def test_environment_directory_is_searched_first(official_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    shutil.copy(official_dir / SMALL, tmp_path / SMALL)
    monkeypatch.setenv("JOMA_OFFICIAL_DIR", str(tmp_path))
    assert locate(SMALL, download_missing=False) == tmp_path / SMALL


def test_missing_file_in_named_directory(tmp_path: Path) -> None:
    with pytest.raises(OfficialDataError, match="does not exist"):
        locate(SMALL, tmp_path)
    with pytest.raises(ValueError, match="name must be one of"):
        locate("other.pt", tmp_path)


def test_corrupted_cache_is_fetched_again(official_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         local_http) -> None:
    monkeypatch.setattr(authors, "CHECKOUT_DATA_DIR", tmp_path / "no_checkout")
    monkeypatch.setattr(authors, "SOURCE_URL", local_http.url + "/joma/")
    local_http.files["/joma/" + SMALL] = (official_dir / SMALL).read_bytes()
    cache = authors.cache_dir()
    cache.mkdir(parents=True)
    (cache / SMALL).write_bytes(b"truncated")
    path = locate(SMALL)
    assert path == cache / SMALL and local_http.hits == ["/joma/" + SMALL]
    assert authors.sha256_of(path) == OFFICIAL_FILES[SMALL]
    assert locate(SMALL) == path and len(local_http.hits) == 1  # now served from the cache


def test_download_with_wrong_content_leaves_nothing(tmp_path: Path, local_http) -> None:
    local_http.files["/x.pt"] = b"not the authors' file"
    with pytest.raises(ChecksumError):
        authors.download(local_http.url + "/x.pt", tmp_path / SMALL, OFFICIAL_FILES[SMALL])
    assert list(tmp_path.iterdir()) == [] and local_http.hits == ["/x.pt"]


def test_offline_download_fails_with_a_clear_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     refused_url: str) -> None:
    monkeypatch.setattr(authors, "SOURCE_URL", refused_url + "/")
    monkeypatch.setattr(authors, "CHECKOUT_DATA_DIR", tmp_path / "no_checkout")
    with pytest.raises(OfficialDataError, match="Offline.*JOMA_OFFICIAL_DIR"):
        locate(SMALL)
    assert not any(authors.cache_dir().iterdir())
    with pytest.raises(OfficialDataError, match="downloading is off"):
        locate(SMALL, download_missing=False)


def test_unroutable_address_fails_fast(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(authors, "SOURCE_URL", "http://10.255.255.1/")
    monkeypatch.setattr(authors, "CHECKOUT_DATA_DIR", tmp_path / "no_checkout")
    start = time.monotonic()
    with pytest.raises(OfficialDataError, match="could not download"):
        locate(SMALL, timeout=1.0)
    assert time.monotonic() - start < 5.0


def test_loading_uses_weights_only(official_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    real_load = torch.load

    def spy(*args, **kwargs):
        seen.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)
    monkeypatch.setattr(torch, "load", spy)
    assert len(read_records(official_dir / SMALL)) == 81
    assert seen == [True]


class _Payload:
    """A class a weights-only load must refuse to rebuild."""


def test_file_with_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "evil.pt"
    torch.save([{"x": _Payload()}], path)
    with pytest.raises(ValueError, match="evil.pt is not a torch file of run records .*Weights only load failed"):
        read_records(path)
    path.write_text("nlayers,lr\n1,0.001\n")  # a text file
    with pytest.raises(ValueError, match="evil.pt is not a torch file of run records"):
        read_records(path)


# ---------------------------------------------------------------------------------------------- the run table API

def test_seed_average_and_summary(toy_runs) -> None:
    avg = seed_average(toy_runs(), 1, 1e-3)
    np.testing.assert_allclose(avg.attn_entropy[:, 0], [2.0, 1.1, 1.4, 1.7])
    assert avg.min_val_loss == pytest.approx(3.5)  # min of the mean (3.6, 3.5), not the mean of the minima (3.45)
    summary = avg.entropy_summary()
    assert summary.argmin_minibatch.tolist() == [10] and summary.interior.tolist() == [True]
    assert summary.bounce[0] == pytest.approx(0.6)
    with pytest.raises(ValueError, match=r"available \(nlayers, lr\): \(1, 0.001\), \(2, 0.001\)"):
        seed_average(toy_runs(), 3, 1e-3)


def test_a_minimum_at_either_end_of_the_run_is_not_interior() -> None:
    """Only a minimum strictly inside the run is a dip: a layer still falling at its last checkpoint, or rising from its
    first, has none (the claims that every layer dips and recovers read this flag)."""
    e = np.array([[3.0, 2.0, 1.0],
                  [2.0, 1.0, 3.0],
                  [1.0, 3.0, 2.0]])  # [checkpoint, layer]: layer 0 falls, layer 1 dips, layer 2 rises
    summary = summarize_entropy(np.array([0, 10, 20]), e)
    assert summary.interior.tolist() == [False, True, False]
    assert summary.argmin_minibatch.tolist() == [20, 10, 0]


def test_run_table_checks_and_round_trip(toy_runs) -> None:
    runs = toy_runs()
    again = SweepRuns.from_arrays(runs.as_arrays())
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(runs.as_arrays().values(),
                                                                       again.as_arrays().values()))
    arrays = runs.as_arrays()
    with pytest.raises(ValueError, match="NaN for the layers"):
        SweepRuns.from_arrays({**arrays, "attn_entropy": np.nan_to_num(arrays["attn_entropy"])})
    with pytest.raises(ValueError, match="strictly increasing"):
        SweepRuns.from_arrays({**arrays, "minibatch": arrays["minibatch"][:, ::-1]})
    with pytest.raises(ValueError, match="val_loss must have shape"):
        SweepRuns.from_arrays({**arrays, "val_loss": arrays["val_loss"][:, :3]})
    with pytest.raises(ValueError, match="missing"):
        SweepRuns.from_arrays({"nlayers": arrays["nlayers"]})
