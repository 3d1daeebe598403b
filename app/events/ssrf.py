"""Which addresses a webhook may reach: public unicast only, checked on every resolution."""

import asyncio
import ipaddress
import socket
from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

from pydantic import AfterValidator, AnyHttpUrl, BeforeValidator

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Classes that `is_global` lets through, or that embed another address.
_DENY = [
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
        "255.255.255.255/32", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32", "ff00::/8", "fc00::/7",
        "fe80::/10", "fec0::/10", "::/128", "::1/128", "::ffff:0:0/96", "100::/64",
    )
]


class UnsafeWebhookURL(ValueError):
    pass


def _no_control_characters(url: object) -> object:
    """A URL parser drops CR, LF and tabs silently (WHATWG): a URL that carried them is not the one that is kept."""
    if isinstance(url, str) and any(ord(char) < 0x20 or ord(char) == 0x7F for char in url):
        raise ValueError("webhook_url must not contain control characters (CR, LF, tab, ...)")
    return url


def _no_credentials(url: AnyHttpUrl) -> AnyHttpUrl:
    """They would be kept and never sent: a receiver verifies the signature instead."""
    if url.username or url.password:
        raise ValueError("webhook_url must not carry credentials (user:pass@); the receiver verifies the "
                         "webhook-signature header with the webhook_secret instead")
    return url


# A receiver's URL as a request gives it (a run's, a draft batch's); where it may resolve to is checked apart (`resolve`)
WebhookURL = Annotated[AnyHttpUrl, BeforeValidator(_no_control_characters), AfterValidator(_no_credentials)]


def blocked(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return True
    return (
        not ip.is_global or ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast
        or ip.is_reserved or ip.is_unspecified or any(ip in net for net in _DENY if net.version == ip.version)
    )


def target(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeWebhookURL("webhook_url must be an absolute http(s) URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UnsafeWebhookURL("webhook_url has an invalid port") from None
    return parts.hostname, port


async def resolve(url: str, *, allow_private: bool, timeout: float = 5.0) -> list[IPAddress]:
    """The addresses to connect to; raises if none may be used."""
    host, port = target(url)
    try:
        infos = await asyncio.wait_for(
            asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout
        )
    except (OSError, asyncio.TimeoutError):
        raise UnsafeWebhookURL(f"webhook_url host {host!r} does not resolve") from None
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))
    if not allow_private:
        refused = [str(a) for a in addresses if blocked(a)]
        if refused:
            raise UnsafeWebhookURL(
                f"webhook_url host {host!r} resolves to a non-public address ({', '.join(refused)}): private, "
                "loopback, link-local, multicast, reserved, CGNAT, NAT64 and 6to4 addresses are refused; "
                "set WEBHOOK_ALLOW_PRIVATE=true for local development"
            )
    return addresses


def redacted(url: str) -> str:
    """The URL as any caller may see it: credentials and query replaced by `***`."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = ("***@" if parts.username or parts.password else "") + host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", ""))
