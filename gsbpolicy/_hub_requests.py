"""Requests to the Hugging Face Hub with a timeout, and their failures as one line that names the endpoint and
what it answered.

huggingface_hub's own HTTP client waits forever for an answer to its API calls (a push to a Hub that accepts
the connection and never answers hangs), retries a download whose Hub does not answer for minutes (six tries
of up to 60 s, twice over, with pauses between), and then says "no connection" whether the Hub timed out,
answered 500 or answered something that is not the Hub's. Inside `hub_requests` the client's transport waits at
most the timeout for each answer and turns a timeout, a refused connection and a server error (5xx) into a
`HubRequestError` at once; `network_problem` names what else went wrong (an answer that is not a Hub's). A
download the Hub failed falls back to a cached copy where there is one (`cached_or_raise`), as huggingface_hub's
own fallback does.

The timeout is `GSBPOLICY_HUB_TIMEOUT` (seconds) when set, else huggingface_hub's download timeout
(`HF_HUB_DOWNLOAD_TIMEOUT`, 10 s by default); the functions that reach the Hub also take it as `timeout=`. It
bounds each wait for an answer, not a whole transfer: a large upload that keeps moving is never cut off. A user
who installed their own client (`huggingface_hub.set_client_factory`) keeps it and its settings.
"""

import contextlib
import contextvars
import logging
import math
import os
import urllib.parse

TIMEOUT_ENV = "GSBPOLICY_HUB_TIMEOUT"

_last_answer: contextvars.ContextVar = contextvars.ContextVar("gsbpolicy_last_hub_answer", default=None)
"""(method, url, status, reason, content type) of the latest answer the client received inside `hub_requests`."""


class HubRequestError(ConnectionError):
    """A request to the Hub failed: no answer in time, no connection, an error answer, or an answer that is not
    a Hub's. The message is one line naming the endpoint and what it answered."""


def hub_timeout(timeout: float | None = None) -> float:
    """The seconds to wait for each Hub answer: `timeout`, else $GSBPOLICY_HUB_TIMEOUT, else huggingface_hub's
    download timeout. ValueError for anything but a finite number > 0."""
    source = "timeout"
    if timeout is None and TIMEOUT_ENV in os.environ:
        source, text = TIMEOUT_ENV, os.environ[TIMEOUT_ENV]
        try:
            timeout = float(text)
        except ValueError:
            raise ValueError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds") from None
    if timeout is None:
        from huggingface_hub import constants

        return float(constants.HF_HUB_DOWNLOAD_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not (math.isfinite(timeout) and timeout > 0)
    ):
        raise ValueError(f"{source} must be a number of seconds > 0, got {timeout!r}")
    return float(timeout)


def _origin(url) -> str:
    parts = urllib.parse.urlsplit(str(url))
    return f"{parts.scheme}://{parts.netloc}"


def _said(method: str, url) -> str:
    return f"{method} {urllib.parse.urlsplit(str(url)).path}"


def _is_httpx(err: BaseException, name: str) -> bool:
    """`err` is httpx's (or httpx2's) error class `name` or a subclass, whichever package the client uses."""
    return any(
        cls.__name__ == name and cls.__module__.split(".")[0].startswith("httpx") for cls in type(err).__mro__
    )


class _StrictTransport:
    """Wraps the client's transport: no wait for an answer longer than the timeout (whatever the request asked
    for), and a timeout, a refused connection or a 5xx answer is a `HubRequestError` (which huggingface_hub
    neither retries nor reports as "no connection")."""

    def __init__(self, inner, timeout: float):
        self._inner, self._timeout = inner, timeout

    def handle_request(self, request):
        asked = request.extensions.get("timeout", {})
        request.extensions["timeout"] = {
            name: self._timeout if asked.get(name) is None else min(asked[name], self._timeout)
            for name in ("connect", "read", "write", "pool")
        }
        where = f"the Hub at {_origin(request.url)}"
        try:
            response = self._inner.handle_request(request)
        except Exception as err:
            if _is_httpx(err, "TimeoutException"):
                raise HubRequestError(
                    f"{where} did not answer {_said(request.method, request.url)} within "
                    f"{self._timeout:g} s (set {TIMEOUT_ENV} to wait longer)"
                ) from None
            if _is_httpx(err, "NetworkError"):
                raise HubRequestError(
                    f"cannot reach {where} ({' '.join(str(err).split()) or type(err).__name__})"
                ) from None
            raise
        _last_answer.set(
            (
                request.method,
                str(request.url),
                response.status_code,
                response.reason_phrase,
                response.headers.get("content-type", "no content type"),
            )
        )
        if response.status_code >= 500:
            body = " ".join(response.read()[:300].decode(errors="replace").split())
            response.close()
            raise HubRequestError(
                f"{where} answered {_said(request.method, request.url)} with "
                f"{response.status_code} {response.reason_phrase}" + (f": {body}" if body else "")
            )
        return response

    def close(self) -> None:
        self._inner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _strict_client(make_client, timeout: float):
    client = make_client()
    client.timeout = timeout
    if hasattr(client, "_transport"):  # httpx keeps the transport (and proxy mounts) in private fields
        client._transport = _StrictTransport(client._transport, timeout)
        client._mounts = {url: _StrictTransport(t, timeout) if t else t for url, t in client._mounts.items()}
    return client


@contextlib.contextmanager
def hub_requests(timeout: float, what: str):
    """Inside: every huggingface_hub request waits at most `timeout` s for an answer, the client's retry
    warnings stay quiet, and a failure of the Hub leaves as `HubRequestError("WHAT: ...")`; any other error
    (a missing repo, offline mode, a bad argument) passes through unchanged."""
    import huggingface_hub
    from huggingface_hub.utils import _http

    previous = getattr(_http, "_GLOBAL_CLIENT_FACTORY", None)
    ours = previous is getattr(_http, "default_client_factory", object())
    if ours:
        huggingface_hub.set_client_factory(lambda: _strict_client(previous, timeout))
    hf_logger = logging.getLogger("huggingface_hub")
    level = hf_logger.level
    hf_logger.setLevel(logging.ERROR)  # "Retrying in 1s [Retry 1/5]": several lines per failed request
    answer = _last_answer.set(None)
    try:
        yield
    except Exception as err:
        if isinstance(err, HubRequestError) and str(err).startswith(f"{what}: "):
            raise
        problem = network_problem(err)
        if problem is None:
            raise
        raise HubRequestError(f"{what}: {problem}") from None
    finally:
        _last_answer.reset(answer)
        hf_logger.setLevel(level)
        if ours:
            huggingface_hub.set_client_factory(previous)


def _chain(err: BaseException | None):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ if err.__cause__ is not None or err.__suppress_context__ else err.__context__


def network_problem(err: BaseException) -> str | None:
    """What went wrong between the client and the Hub, as a clause naming the endpoint and its answer; None when
    `err` is not a failure of the Hub (a missing or private repo, offline mode, a bad argument)."""
    from huggingface_hub import constants
    from huggingface_hub.errors import FileMetadataError, HfHubHTTPError

    answer = _last_answer.get()
    for cause in _chain(err):
        if isinstance(cause, HubRequestError):
            return str(cause)
        if isinstance(cause, HfHubHTTPError) and cause.response is not None:
            response = cause.response
            if response.status_code in (401, 404):
                return None  # a private, gated or missing repo: the caller says which
            server = " ".join((getattr(cause, "server_message", None) or "").split())[:200]
            return (
                f"the Hub at {_origin(response.request.url)} answered {_said(response.request.method, response.request.url)} "
                f"with {response.status_code} {response.reason_phrase}" + (f": {server}" if server else "")
            )
        if isinstance(cause, FileMetadataError) and answer:
            return (
                f"the Hub at {_origin(answer[1])} answered {_said(answer[0], answer[1])} with {answer[2]} "
                f"{answer[3]} but without the file metadata a Hugging Face Hub sends (is {constants.ENDPOINT} "
                "a Hub?)"
            )
        if _is_httpx(cause, "TimeoutException") or _is_httpx(cause, "NetworkError"):  # a user's own client
            return f"cannot reach the Hub at {constants.ENDPOINT} ({type(cause).__name__}: {cause})"
    if answer and isinstance(err, ValueError | KeyError | TypeError | AttributeError | IndexError):
        return (
            f"the Hub at {_origin(answer[1])} answered {_said(answer[0], answer[1])} with {answer[2]} "
            f"{answer[3]} ({answer[4]}), which is not a Hub answer ({type(err).__name__}: "
            f"{' '.join(str(err).split())[:200]})"
        )
    return None
