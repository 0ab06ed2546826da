import pytest

from reqbuild import USER_AGENT, auth_header, build_request, with_query


def test_basic_get():
    req = build_request("get", "https://api.example.org/items", params={"page": 2})
    assert req.method == "GET"
    assert req.url == "https://api.example.org/items?page=2"
    assert req.headers["User-Agent"] == USER_AGENT
    assert req.body is None


def test_json_body():
    req = build_request("post", "https://x.test/", json_body={"a": 1})
    assert req.body == b'{"a":1}'
    assert req.headers["Content-Type"] == "application/json"


def test_auth_headers():
    assert auth_header("t0k") == "Bearer t0k"
    assert auth_header(("ann", "pw")) == "Basic YW5uOnB3"
    with pytest.raises(TypeError):
        auth_header(42)


def test_with_query_keeps_existing():
    assert with_query("https://x.test/?a=1", {"b": [2, 3]}) == "https://x.test/?a=1&b=2&b=3"


def test_custom_user_agent_wins():
    req = build_request("get", "https://x.test/", headers={"User-Agent": "mine"})
    assert req.headers["User-Agent"] == "mine"


def test_token_does_not_leak_into_next_request():
    build_request("get", "https://x.test/private", auth="s3cr3t")
    public = build_request("get", "https://x.test/public")
    assert "Authorization" not in public.headers
