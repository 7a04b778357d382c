"""The verification campaign: the refinement workload's scenarios, seeded and many, run on
Spark (``bkref campaign``), recorded traces validated in bulk (``bkref check-traces``), and one
scenario re-run locally (``bkref replay``). The guide is docs/campaign.md."""
