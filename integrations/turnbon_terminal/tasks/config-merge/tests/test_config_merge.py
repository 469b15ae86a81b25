"""Verifier of the config-merge task: checks the deliverable in $TASK_WORKDIR."""

from __future__ import annotations

import json
import os
from pathlib import Path

WORKDIR = Path(os.environ["TASK_WORKDIR"])


def test_merged_config() -> None:
    path = WORKDIR / "config.json"
    assert path.is_file(), "config.json was not created"
    assert json.loads(path.read_text()) == {
        "service": {"name": "api", "port": 9090, "tls": {"enabled": True}, "region": "eu"},
        "workers": 4,
        "features": ["search"],
        "logging": "syslog",
        "debug": False,
    }
