"""Bridges to training frameworks. Optional: nothing below imports these modules."""
