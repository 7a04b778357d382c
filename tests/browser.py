"""Headless Chromium for the tests of the HTML reports (bkref conform's and bkref campaign's):
the page as the browser built it, and a screenshot. Offline: every flag that would make it
reach the network is off, and each call gets a new empty profile."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

#: Skips a test where Chromium is not installed, saying how to install it.
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no headless Chromium here (chromium not on PATH; Debian: apt-get install chromium)",
)


def _flags(profile: Path) -> list[str]:
    return [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--no-first-run", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}",
    ]  # fmt: skip


def dump_dom(page: Path, profile: Path) -> str:
    """The page's DOM after Chromium loaded it."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, *_flags(profile), "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout


def screenshot(page: Path, profile: Path, shot: Path, size: str) -> bytes:
    """A PNG of the page in a window of ``size`` (``WIDTHxHEIGHT``), written to ``shot``."""
    assert CHROMIUM is not None
    window = size.replace("x", ",")
    subprocess.run(
        [CHROMIUM, *_flags(profile), f"--window-size={window}", f"--screenshot={shot}",
         page.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    return shot.read_bytes()
