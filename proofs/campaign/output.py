"""Where ``bkref campaign`` and ``bkref check-traces`` write: a new directory per run, never
one that already holds something (a run never writes into another's rows), absolute (a
cluster's executors write the dataset from their own working directories)."""

from __future__ import annotations

import contextlib
import os
import time

from proofs.campaign.errors import CampaignError


def new_output_dir(out: str | None, root: str, suffix: str = "") -> str:
    """``out`` (created; refused unless new or empty), else a new directory under ``root``
    named for the time (and ``suffix``), with ``root/latest`` pointed at it. Absolute.
    Raises CampaignError."""
    if out:
        if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
            raise CampaignError(
                f"--out {out} exists and is not an empty directory: a run writes a new one, "
                "never into another's rows"
            )
        os.makedirs(out, exist_ok=True)
        return os.path.abspath(out)
    name = time.strftime("%Y%m%d-%H%M%S", time.localtime()) + suffix
    path = os.path.join(root, name)
    number = 1
    while os.path.exists(path):
        number += 1
        path = os.path.join(root, f"{name}-{number}")
    os.makedirs(path)
    latest = os.path.join(root, "latest")
    with contextlib.suppress(OSError):
        if os.path.islink(latest):
            os.unlink(latest)
        if not os.path.exists(latest):
            os.symlink(os.path.basename(path), latest)
    return os.path.abspath(path)
