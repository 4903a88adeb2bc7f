"""Secrets kept out of every surface: error messages, log lines, status files and `--json` output.

A remote's URL may carry credentials (`s3://KEY:SECRET@bucket`, `https://host/x?token=...`, a
presigned `X-Amz-Signature=...`) and so may its storage options (`secret`, `token`, an `endpoint_url`
with a query string). Libraries repeat them in their own messages (botocore quotes the endpoint it
could not resolve; s3fs names the "bucket" `KEY:SECRET@bucket`). Two layers keep them out:

- `Redactor(url, storage_options).text(message)`: what one remote knows is secret (the URL's userinfo
  and query, every string value of its storage options of `MIN_SECRET` characters or more, an
  endpoint URL replaced by its redacted form), then `scrub`. Every remote failure passes through it
  (sync/remote.py, `Remote.failing`).
- `scrub(text)`: what looks like a secret in any text: userinfo before `@`, URL query strings, and
  `token=` / `signature=` / `X-Amz-*=` parameters. The CLI's error line and the sync status pass through it.

tests/sync/test_redaction.py plants an endpoint query token and a bucket credential and looks for them on each surface.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

REDACTED = "***"
MIN_SECRET = 8  # shorter storage option values are not looked for (they would blank common words in messages)

_USERINFO_IN_URL = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/?#@'\"`]+@")
_USERINFO_BARE = re.compile(r"(?<![\w/.:-])[^\s/?#@:'\"`]+:[^\s/?#@'\"`]+@(?=[\w.-])")  # KEY:SECRET@bucket without a scheme
_QUERY_IN_URL = re.compile(r"(?P<url>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#'\"`]*)\?[^\s#'\"`]*")
_SECRET_PARAMETER = re.compile(
    r"(?i)(?P<name>\b(?:x-amz-[a-z-]+|x-goog-[a-z-]+|token|access_token|sig|signature|secret|password|credential)=)[^&\s'\"`]+"
)


def redact_url(url: str) -> str:
    """The URL without userinfo, query string or fragment: what messages and the store's remotes/ may name."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query="", fragment=""))


def scrub(text: str) -> str:
    """`text` with whatever looks like a credential replaced: userinfo, query strings, secret parameters."""
    text = _USERINFO_IN_URL.sub(r"\g<scheme>", text)
    text = _USERINFO_BARE.sub("", text)
    text = _QUERY_IN_URL.sub(rf"\g<url>?{REDACTED}", text)
    return _SECRET_PARAMETER.sub(rf"\g<name>{REDACTED}", text)


class Redactor:
    """What one remote's URL and storage options hold that must not be shown, and `text()` to hide it."""

    def __init__(self, url: str, storage_options: dict[str, Any]) -> None:
        replacements: dict[str, str] = {}
        for value in [url, *_strings(storage_options)]:
            parts = urllib.parse.urlsplit(value)
            if parts.scheme and (parts.netloc or parts.query):
                userinfo = parts.netloc.rpartition("@")[0]
                for secret in (userinfo, parts.query, parts.fragment):
                    if secret:
                        replacements[secret] = REDACTED
                if value != url:
                    replacements[value] = redact_url(value) + (f"?{REDACTED}" if parts.query else "")
            elif value != url and len(value) >= MIN_SECRET:
                replacements[value] = REDACTED
        # longest first: a secret that contains another is replaced whole
        self._replacements = sorted(replacements.items(), key=lambda item: -len(item[0]))

    def text(self, message: str) -> str:
        for secret, shown in self._replacements:
            message = message.replace(secret, shown)
        return scrub(message)


def _strings(value: Any) -> Iterator[str]:
    """Every string in a storage options value (nested dicts and lists: client_kwargs, config_kwargs)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
