"""The errors of the campaign commands, importable without pyspark (proofs/campaign/spark.py
raises SparkUnavailable, and the commands catch it before any JVM is started)."""

from __future__ import annotations

from spec.errors import BkrefError


class CampaignError(BkrefError):
    """A campaign cannot be carried out as asked (a bad focus, a variant that cannot be
    loaded, an output directory in use): the message says what and what to do."""


class SparkUnavailable(CampaignError):
    """Spark cannot run here or failed: the message says why and what to do."""
