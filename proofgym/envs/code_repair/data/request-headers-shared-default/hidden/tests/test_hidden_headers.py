# PROOFGYM-CANARY request-headers-shared-default 7f3c9b2e
from reqbuild import USER_AGENT, build_request

BASE = {"Accept": "application/json"}


def test_caller_headers_are_not_modified():
    headers = {"Accept": "text/csv"}
    build_request("post", "https://x.test/", headers=headers, auth="tok", json_body=[1])
    assert headers == {"Accept": "text/csv"}


def test_shared_default_headers_do_not_leak_auth():
    first = build_request("get", "https://x.test/a", headers=BASE, auth=("ann", "pw"))
    second = build_request("get", "https://x.test/b", headers=BASE)
    assert first.headers["Authorization"].startswith("Basic ")
    assert "Authorization" not in second.headers
    assert second.headers == {"Accept": "application/json", "User-Agent": USER_AGENT}


def test_content_type_does_not_leak():
    build_request("post", "https://x.test/", json_body={"x": 1})
    assert "Content-Type" not in build_request("get", "https://x.test/").headers


def test_requests_do_not_share_header_dicts():
    a = build_request("get", "https://x.test/a")
    b = build_request("get", "https://x.test/b")
    a.headers["X-Trace"] = "1"
    assert "X-Trace" not in b.headers


def test_two_tokens_stay_separate():
    a = build_request("get", "https://x.test/", auth="alpha")
    b = build_request("get", "https://x.test/", auth="beta")
    assert a.headers["Authorization"] == "Bearer alpha"
    assert b.headers["Authorization"] == "Bearer beta"


def test_default_headers_for_plain_request():
    assert build_request("get", "https://x.test/").headers == {"User-Agent": USER_AGENT}
