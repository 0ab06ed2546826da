"""Authorization header values."""

import base64


def auth_header(auth):
    """``"Bearer <token>"`` for a token string, ``"Basic <base64>"`` for a (user, password) pair."""
    if isinstance(auth, str):
        return f"Bearer {auth}"
    if isinstance(auth, tuple) and len(auth) == 2:
        user, password = auth
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return f"Basic {token}"
    raise TypeError(f"auth must be a token string or a (user, password) pair, got {type(auth).__name__}")
