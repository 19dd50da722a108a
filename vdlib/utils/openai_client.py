"""The one home of OpenAI-compatible API access: the key, the server and the client.

Both API users of vdlib (the verifier, :mod:`vdlib.evaluation.verifier`, and the OpenAI embedder,
:mod:`vdlib.metrics.embeddings`) build their client here:

- key: read from ``$OPENAI_API_KEY`` only, at the moment a client is built (that is, when a
  request is about to be sent); it is never taken from a config, a params file or an argument,
  and never written into a cache or an artifact. A missing key raises
  :class:`MissingAPIKeyError`, whose message names the variable. The key goes from the
  environment into the ``openai.OpenAI`` object and nowhere else: that object keeps it in memory
  to authenticate its requests, so whoever holds the client holds the key;
- server: an explicit ``base_url``, else ``$OPENAI_BASE_URL``, else OpenAI's API
  (:func:`resolve_base_url`);
- retries: :func:`retry_after_s` reads a failed response's ``retry-after-ms`` /
  ``Retry-After`` header for callers that retry themselves.

>>> resolve_base_url("http://127.0.0.1:8000/v1")
'http://127.0.0.1:8000/v1'
"""

from __future__ import annotations

import email.utils
import os
import time
from typing import Any

__all__ = ["OPENAI_KEY_ENV", "OPENAI_BASE_URL_ENV", "MissingAPIKeyError", "resolve_base_url",
           "require_api_key", "openai_client", "retry_after_s"]

OPENAI_KEY_ENV = "OPENAI_API_KEY"
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"


class MissingAPIKeyError(RuntimeError):
    """An API client needs a key that the environment (``$OPENAI_API_KEY``) does not hold."""


def resolve_base_url(base_url: str | None = None) -> str | None:
    """``base_url``, else ``$OPENAI_BASE_URL``, else None (OpenAI's API)."""
    return base_url or os.environ.get(OPENAI_BASE_URL_ENV) or None


def require_api_key(needed_by: str, alternative: str) -> str:
    """The key in ``$OPENAI_API_KEY``; :class:`MissingAPIKeyError` when it is unset or empty.

    ``needed_by`` says who needs it (``"embedder 'openai:x'"``), ``alternative`` what works
    without one (``"use dry_run=True"``); both go into the error message, the key never does.
    """
    key = os.environ.get(OPENAI_KEY_ENV)
    if not key:
        raise MissingAPIKeyError(
            f"{needed_by} needs an API key: set the {OPENAI_KEY_ENV} environment variable "
            f"({OPENAI_BASE_URL_ENV} for another OpenAI-compatible server), or {alternative}")
    return key


def openai_client(needed_by: str, alternative: str, *, base_url: str | None = None,
                  timeout: float = 60.0, max_retries: int = 0) -> Any:
    """An ``openai.OpenAI`` client for the server of :func:`resolve_base_url` with the key of
    :func:`require_api_key` (checked before ``openai`` is imported). ``max_retries`` is the
    client's own retry count (0 where the caller retries itself)."""
    key = require_api_key(needed_by, alternative)
    from openai import OpenAI

    return OpenAI(api_key=key, base_url=resolve_base_url(base_url), timeout=timeout,
                  max_retries=max_retries)


def retry_after_s(err: Exception) -> float | None:
    """Seconds to wait from a failed response's ``retry-after-ms`` or ``Retry-After`` header
    (seconds or an HTTP date), if any; never negative.

    >>> class Response:
    ...     headers = {"retry-after-ms": "1500"}
    >>> class Failure(Exception):
    ...     response = Response()
    >>> retry_after_s(Failure()), retry_after_s(ValueError())
    (1.5, None)
    """
    headers = getattr(getattr(err, "response", None), "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # an HTTP date
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
