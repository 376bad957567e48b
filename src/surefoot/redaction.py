"""Secrets out of URLs before they are shown: the one redaction of URLs in surefoot.

``surefoot.storage.redact`` is this function; CLI headers and messages, the ui, logs,
reprs, error messages, lab reports and JSON output show URLs through it. It imports
nothing from surefoot, so every layer (``errors`` included) can use it.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

__all__ = ["MASK", "redact_url"]

# Query parameters whose values are secrets (``?password=``, ``?api_key=``, ``?token=`` …).
_SECRET_PARAM = re.compile(
    r"(?i)^(?:.*(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|"
    r"credential|signature|auth(?:orization)?)|key|sig)$"
)
MASK = "***"


def redact_url(url: str) -> str:
    """``url`` as it may be shown: the password and secret query values replaced by ``***``.

    This is the one redaction of URLs in surefoot: CLI headers and messages, the ui, logs,
    reprs, lab reports and JSON output show URLs through it. The user name and host stay
    (they say which database it is); a password in the user part, and the value of any
    query parameter named like a secret (``password``, ``api_key``, ``token``, ``secret``,
    ``key``, ``sig`` …), become ``***``. Anything that is not a URL comes back unchanged.

    >>> redact_url("postgresql://app:hunter2@db/x?schema=a&password=pw2")
    'postgresql://app:***@db/x?schema=a&password=***'
    >>> redact_url("http://127.0.0.1:8089/v1?api_key=sk-abc")
    'http://127.0.0.1:8089/v1?api_key=***'
    """
    if not isinstance(url, str) or "://" not in url:
        return url
    scheme, _, rest = url.partition("://")
    # split by hand: the parts that hold no secret stay exactly as given. The user part
    # ends at the last "@" before any "?" or "#" (a password may hold a "/").
    end = min([i for i in (rest.find("?"), rest.find("#")) if i != -1] or [len(rest)])
    user_end = rest.rfind("@", 0, end)
    userinfo, rest = (rest[:user_end], rest[user_end + 1 :]) if user_end != -1 else ("", rest)
    cut = min(
        [i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i != -1] or [len(rest)]
    )
    host, tail = rest[:cut], rest[cut:]
    netloc = host
    if user_end != -1:
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if colon else f"{userinfo}@{host}"
    before_fragment, hash_, fragment = tail.partition("#")
    path, q, query = before_fragment.partition("?")
    if q:
        query = "&".join(_redact_pair(pair) for pair in query.split("&"))
    return f"{scheme}://{netloc}{path}{q}{query}{hash_}{fragment}"


def _redact_pair(pair: str) -> str:
    name, eq, value = pair.partition("=")
    if eq and value and _SECRET_PARAM.match(unquote_plus(name)):
        return f"{name}={MASK}"
    return pair
