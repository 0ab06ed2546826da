"""The request value and its builder."""

import json
from dataclasses import dataclass

from reqbuild.auth import auth_header
from reqbuild.urls import with_query

USER_AGENT = "reqbuild/1.4"


@dataclass
class Request:
    method: str
    url: str
    headers: dict
    body: bytes = None


def build_request(method, url, params=None, headers=None, auth=None, json_body=None):
    """A ``Request``; ``headers`` is copied, never modified."""
    if headers is None:
        headers = {}  # a new dict per call instead of one shared default
    headers.setdefault("User-Agent", USER_AGENT)
    if auth is not None:
        headers["Authorization"] = auth_header(auth)
    body = None
    if json_body is not None:
        body = json.dumps(json_body, separators=(",", ":")).encode("utf-8")
        headers["Content-Type"] = "application/json"
    return Request(method.upper(), with_query(url, params), headers, body)
