"""The package version; part of every rollout contract."""

__version__ = "0.1.0"
