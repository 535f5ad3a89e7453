"""Shared test setup: offline by default, a headless matplotlib backend, and bf16 probed before any test runs.

The probe (:func:`joma_lib.cpu.bf16_support`) must run before the first bf16 operation of the process: where
oneDNN's default bf16 kernels die (AMX advertised but unusable), it limits oneDNN's instruction set, which
oneDNN reads only on its first use. Tests that exercise bf16 itself are skipped, with the probe's verdict as
the reason, on a CPU where no bf16 path runs: mark them ``@pytest.mark.bf16``.
"""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

from joma_lib.cpu import bf16_support  # noqa: E402 - after the environment above

BF16 = bf16_support()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked ``bf16`` where the probe found no bf16 path, saying why."""
    if BF16.usable:
        return
    skip = pytest.mark.skip(reason=f"this CPU cannot run bf16: {BF16.summary()}")
    for item in items:
        if "bf16" in item.keywords:
            item.add_marker(skip)
