"""Where the tests find the repository's files, wherever a test module sits in tests/."""

from __future__ import annotations

from pathlib import Path

#: The repository's top level.
ROOT = Path(__file__).resolve().parents[1]
#: Sample files the tests read (a bk_server.conf of our own, ...).
TEST_DATA = ROOT / "tests" / "unit" / "data"
