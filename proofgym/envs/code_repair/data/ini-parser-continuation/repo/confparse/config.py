"""Typed access to parsed INI data."""

from confparse.parser import parse_ini

_TRUE = {"1", "yes", "true", "on"}
_FALSE = {"0", "no", "false", "off"}
_MISSING = object()


class Config:
    """Parsed INI data with typed getters. Missing keys return ``default`` or raise ``KeyError``."""

    def __init__(self, data):
        self.data = data

    @classmethod
    def from_text(cls, text):
        return cls(parse_ini(text))

    def get(self, section, key, default=_MISSING):
        try:
            return self.data[section][key]
        except KeyError:
            if default is _MISSING:
                raise KeyError(f"no option {key!r} in section [{section}]") from None
            return default

    def getint(self, section, key, default=_MISSING):
        value = self.get(section, key, default)
        return value if value is default else int(value)

    def getbool(self, section, key, default=_MISSING):
        value = self.get(section, key, default)
        if value is default:
            return value
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(f"[{section}] {key} = {value!r} is not a boolean")

    def getlist(self, section, key, default=_MISSING):
        value = self.get(section, key, default)
        if value is default:
            return value
        items = []
        for line in value.split("\n"):
            items.extend(part.strip() for part in line.split(","))
        return [item for item in items if item]
