"""Attachments of received mail: one file's metadata and bytes, for a reply that forwards it.

``GET /v0/inboxes/{inbox_id}/messages/{message_id}/attachments/{attachment_id}`` answers a
presigned ``download_url`` (reference/agentmail-api.md §2.4); the bytes come from that URL, which
needs no credentials, so our key is never sent there. Raises ProviderError: the caller is an
agent's request, where a clear error is the right answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from agentmail.core.api_error import ApiError
from django.conf import settings

from .client import NO_RETRIES, encode_path_segment, http_client, sdk
from .responses import ProviderError, parse_error_body


@dataclass(frozen=True)
class ReceivedAttachment:
    filename: str
    content_type: str
    content: bytes


def _download_allowed(url: str) -> bool:
    """HTTPS anywhere (AgentMail's CDN), or the provider's own base URL (the sandbox on
    loopback): never plain HTTP to a host the answer names."""
    parts = urlsplit(url)
    base = urlsplit(settings.AGENTMAIL_BASE_URL)
    if parts.scheme == "https" and parts.hostname:
        return True
    return (parts.scheme, parts.netloc) == (base.scheme, base.netloc)


def fetch_attachment(
    *, api_key: str, inbox_id: str, message_id: str, attachment_id: str, max_bytes: int
) -> ReceivedAttachment:
    """One attachment of a received message, at most ``max_bytes`` long."""
    try:
        meta = sdk(api_key).inboxes.messages.get_attachment(
            inbox_id,
            encode_path_segment(message_id),
            encode_path_segment(attachment_id),
            request_options=NO_RETRIES,
        )
    except ApiError as exc:
        body = parse_error_body(exc.body)
        raise ProviderError(
            body.message or f"AgentMail answered {exc.status_code}",
            status=exc.status_code,
            code=body.code or f"http_{exc.status_code}",
        ) from None
    except httpx.TransportError as exc:
        raise ProviderError("AgentMail could not be reached", code=type(exc).__name__) from None
    url = getattr(meta, "download_url", None)
    if not isinstance(url, str) or not _download_allowed(url):
        raise ProviderError("AgentMail gave no usable download URL", code="malformed_response")
    try:
        with http_client().stream("GET", url) as response:
            if response.status_code != 200:
                raise ProviderError(
                    f"The download answered {response.status_code}",
                    status=response.status_code,
                    code=f"http_{response.status_code}",
                )
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise ProviderError("The file is larger than allowed", code="too_large")
                chunks.append(chunk)
    except httpx.TransportError as exc:
        raise ProviderError("The download failed", code=type(exc).__name__) from None
    return ReceivedAttachment(
        filename=getattr(meta, "filename", None) or "",
        content_type=getattr(meta, "content_type", None) or "application/octet-stream",
        content=b"".join(chunks),
    )
