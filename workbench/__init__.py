"""PE-Lab: how positional encodings shape what attention heads do."""

__version__ = "0.1.0"
