"""The bkref contract: vocabulary, errors, crash plans and normative format pages.

spec/ imports nothing of ours. Both models/ and impl/ import it; they never import
each other (see docs/design.md).
"""
