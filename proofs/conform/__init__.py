"""The conformance kit: ``bkref conform`` drives any bookie that speaks the adapter protocol
(spec/adapter.md) through seeded scenarios, kills and power losses, and judges what it
answered with the model (docs/conformance.md)."""
