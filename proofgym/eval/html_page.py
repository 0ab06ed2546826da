"""The shared frame of proofgym's self-contained HTML pages (report, compare).

Each page inlines its CSS and script and pins them by hash in a Content-Security-Policy, so a
transcript that contains markup can never run code or load anything when the file is opened.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape
from importlib import resources


def asset(name: str) -> str:
    """A bundled file from ``proofgym/eval/report_assets``."""
    return resources.files("proofgym.eval").joinpath("report_assets", name).read_text(encoding="utf-8")


def csp_hash(text: str) -> str:
    """The CSP source expression that allows exactly this inline style or script."""
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def page_head(title: str, css: str, js: str | None = None) -> str:
    """Everything up to and including ``<body>``: the CSP admits only ``css`` (and ``js``)."""
    script = f"script-src '{csp_hash(js)}'; " if js is not None else ""
    csp = (f"default-src 'none'; style-src '{csp_hash(css)}'; {script}"
           "img-src data:; base-uri 'none'; form-action 'none'")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{escape(title)}</title>
<style>{css}</style></head>
<body>
"""
