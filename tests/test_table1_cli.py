"""``python -m joma_lib.table1``: runs, and rejects bad arguments with a usage error."""

from __future__ import annotations

import pytest

from joma_lib.table1.cli import main


def test_command_line_runs_and_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", "quick", "--steps", "2", "--seeds", "1", "--device", "cpu", "--no-progress"]) == 0
    assert "L0 trained" in capsys.readouterr().out
    for argv, message in [(["--config", "huge"], "config must be one of"),
                          (["--device", "tpu"], "device must be one of"),
                          (["--seeds", "one"], "seeds must be integers"),
                          (["--steps", "0"], "steps must be"),
                          (["--save", "table.json"], "--save must name an .npz file")]:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
