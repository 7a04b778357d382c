"""Executable reference models. Pure; import spec/ only, never impl/."""
