"""reqbuild: building HTTP requests."""

from reqbuild.auth import auth_header
from reqbuild.request import USER_AGENT, Request, build_request
from reqbuild.urls import with_query

__all__ = ["USER_AGENT", "Request", "auth_header", "build_request", "with_query"]
