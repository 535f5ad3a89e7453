import pytest
import torch

from joma_lib.device import resolve_device


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
