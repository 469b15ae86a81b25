"""The README's main job, `turnbon demo`, end to end on the bundled stub."""

from __future__ import annotations

import pytest

from turnbon_graph.cli import main


def test_demo_runs_an_episode_and_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "-n", "3", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "Turn 1:" in out and "chosen [" in out
    assert "-> write_file: wrote" in out
    assert "Verdict: PASS" in out


def test_help_lists_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "demo" in capsys.readouterr().out
