"""confparse: a small INI reader without interpolation."""

from confparse.config import Config
from confparse.parser import ParseError, parse_ini

__all__ = ["Config", "ParseError", "parse_ini"]
