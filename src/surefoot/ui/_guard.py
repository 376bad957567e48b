"""The inspector's defences: host and access-token checks, CSRF, and the response headers.

Every page is served with a Content-Security-Policy that allows no script at all (the pages
have none: confirmations are pages, folding is ``<details>``), so a value from a run or a
store that slipped past escaping still could not execute. Actions are POSTs that need a
same-origin ``Origin`` (or ``Referer``) and a CSRF token bound to a cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

__all__ = ["HEADERS", "Guard"]

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
CSRF_COOKIE = "sf_csrf"
TOKEN_COOKIE = "sf_token"


class Guard:
    """Checks one server's requests.

    Args:
        token: the access token every request must carry (cookie, bearer header or
            ``?token=`` once), or None on loopback.
        allowed_hosts: the ``Host`` header values accepted (stops DNS rebinding on loopback),
            or None for any.
    """

    def __init__(self, token: str | None, allowed_hosts: set[str] | None) -> None:
        self.token = token
        self.allowed_hosts = allowed_hosts
        self._secret = secrets.token_bytes(32)

    def host_ok(self, host: str) -> bool:
        return self.allowed_hosts is None or host in self.allowed_hosts

    def token_ok(self, cookie: str | None, header: str | None, query: str | None) -> bool:
        if self.token is None:
            return True
        offered = [cookie, query]
        if header and header.lower().startswith("bearer "):
            offered.append(header[7:].strip())
        return any(o is not None and hmac.compare_digest(o, self.token) for o in offered)

    def new_cookie(self) -> str:
        return secrets.token_urlsafe(24)

    def csrf_for(self, cookie: str) -> str:
        """The form token for a CSRF cookie (an HMAC under this server's secret)."""
        return hmac.new(self._secret, cookie.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, cookie: str | None, form_token: str | None) -> bool:
        if not cookie or not form_token:
            return False
        return hmac.compare_digest(self.csrf_for(cookie), form_token)

    @staticmethod
    def same_origin(origin: str | None, referer: str | None, host: str, scheme: str) -> bool:
        """The POST came from one of our own pages: Origin (or else Referer) is this server."""
        mine = f"{scheme}://{host}"
        if origin:
            return origin == mine
        if referer:
            parts = urlsplit(referer)
            return f"{parts.scheme}://{parts.netloc}" == mine
        return False
