"""Where the implementation meets the model: checkers, the crash-state explorer and the
``bkref`` command line. Only proofs/ and tests/ import both models/ and impl/."""
