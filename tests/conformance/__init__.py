"""Conformance tests: bookies other than bkref's own, judged through the adapter protocol."""
