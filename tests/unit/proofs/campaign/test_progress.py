"""The progress line of a campaign (proofs/campaign/progress.py)."""

from __future__ import annotations

import io

from proofs.campaign.progress import ProgressLine, render


def test_the_line_says_how_far_how_fast_and_what_failed() -> None:
    line = render("pass 1", 200, (50, 1, 0, 20_000, 900), 10.0)
    assert line.startswith("pass 1 [######..................] 50/200 scenarios")
    assert "5.0/s" in line and "steps 2,000/s" in line and "crash states 90/s" in line
    assert "failures 1" in line and "errors" not in line and "30 s left" in line
    assert "errors 2" in render("pass 2", 10, (10, 0, 2, 5, 5), 1.0)
    assert "left" not in render("pass 2", 10, (10, 0, 0, 5, 5), 1.0)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_into_a_file_a_line_per_tenth_and_one_at_the_end() -> None:
    out, clock = io.StringIO(), _Clock()
    progress = ProgressLine("pass 1", 100, out, tty=False, clock=clock)
    for done in range(0, 101, 5):
        clock.now += 1
        progress.update((done, 0, 0, done * 10, done))
    progress.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 11  # 0%, 10%, ..., 100%: once each, none repeated at the end
    assert lines[-1].startswith("pass 1 [########################] 100/100 scenarios")


def test_on_a_terminal_the_line_is_redrawn_in_place() -> None:
    out, clock = io.StringIO(), _Clock()
    progress = ProgressLine("pass 1", 4, out, tty=True, clock=clock)
    for done in range(5):
        clock.now += 1
        progress.update((done, 0, 0, 0, 0))
    progress.finish()
    text = out.getvalue()
    assert text.count("\r") == 6 and text.endswith("\n") and text.count("\n") == 1
