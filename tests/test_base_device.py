import pytest
import torch

from joma_lib.base.device import pinned_threads, resolve_device


def test_cpu_and_auto(monkeypatch):
    monkeypatch.delenv("JOMA_DEVICE", raising=False)
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device().type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_env_variable_sets_default(monkeypatch):
    monkeypatch.setenv("JOMA_DEVICE", "cpu")
    assert resolve_device() == torch.device("cpu")


def test_unknown_device_is_rejected():
    with pytest.raises(ValueError, match=r"device must be one of \['auto', 'cpu', 'cuda'\]"):
        resolve_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA GPU"):
        resolve_device("cuda")


@pytest.mark.parametrize("threads", [1, 2, None])
def test_pinned_threads_sets_and_restores_the_count(threads):
    before = torch.get_num_threads()
    with pinned_threads(threads):
        assert torch.get_num_threads() == (before if threads is None else threads)
    assert torch.get_num_threads() == before


def test_pinned_threads_restores_the_count_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="inside"), pinned_threads(before + 1):
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("threads", [0, -2, 2.5, True, "4", 2000])
def test_pinned_threads_refuses_a_bad_count_naming_the_argument(threads):
    before = torch.get_num_threads()
    with pytest.raises(ValueError, match=r"threads must be an integer in \[1, 1024\], got"), pinned_threads(threads):
        pass
    assert torch.get_num_threads() == before
