"""The bkref storage engine. Imports spec/ only, never models/ (docs/design.md).

All I/O goes through impl.fs.FileSystem; clocks and randomness are passed in.
"""
