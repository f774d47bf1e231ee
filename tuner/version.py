"""The tuner's version: what every stored environment and exported file names."""

__version__ = "0.1.0"
