"""Output directories (proofs/campaign/output.py): new each run, absolute, ``latest``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from proofs.campaign.errors import CampaignError
from proofs.campaign.output import new_output_dir


def test_each_run_gets_a_new_directory_and_latest_points_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both runs in the same second: the second directory takes a number.
    monkeypatch.setattr(time, "strftime", lambda *_args: "20261128-120000")
    root = tmp_path / "runs"
    first = new_output_dir(None, str(root), "-seed1")
    second = new_output_dir(None, str(root), "-seed1")
    assert first != second and os.path.isabs(first) and os.path.isdir(second)
    assert Path(first).name == "20261128-120000-seed1"
    assert Path(second).name == "20261128-120000-seed1-2"
    assert (root / "latest").resolve() == Path(second).resolve()


def test_a_given_directory_must_be_new_or_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert new_output_dir(str(empty), "unused") == str(empty)
    (empty / "rows").write_text("x")
    with pytest.raises(CampaignError, match="not an empty directory"):
        new_output_dir(str(empty), "unused")
    assert (empty / "rows").read_text() == "x"
