"""Where the outbox may send: webhook targets checked when a URL is saved and again when it is sent.

A target is https (http only with WEBHOOK_ALLOW_HTTP) on a public address: never loopback, link-local,
private, shared, multicast, reserved or unspecified, IPv4 or IPv6, whatever the spelling (`[::ffff:127.0.0.1]`,
`2130706433`, `0177.1`, `0x7f.0.0.1`). WEBHOOK_ALLOWED_HOSTS names the on-prem receivers that may be anything
else: host names, addresses or networks (CIDR). At send time the name is resolved once, every address is
checked, and the request connects to the checked address (so a name cannot be rebound to 127.0.0.1 between
the check and the connection); the TLS certificate is still checked against the name.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import SplitResult, urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

NOT_HTTPS = "must be an https:// URL (http:// only where WEBHOOK_ALLOW_HTTP is set)"
NO_HOST = "names no host"
FORBIDDEN = "points at {address}, a {kind} address: webhooks go only to public addresses (or WEBHOOK_ALLOWED_HOSTS)"
UNRESOLVED = "names {host}, which does not resolve"
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
LOCAL_NAMES = ("localhost", ".localhost", ".local", ".internal", ".home.arpa")


def _kind(ip: Address) -> str | None:
    """Why an address is not a public one (None: it is public)."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in NAT64
                                                       else None)  # fmt: skip
        if embedded is not None:
            return _kind(embedded)
    for kind, flag in (("unspecified", ip.is_unspecified), ("loopback", ip.is_loopback),
                       ("link-local", ip.is_link_local), ("multicast", ip.is_multicast),
                       ("private", ip.is_private), ("reserved", ip.is_reserved)):  # fmt: skip
        if flag:
            return kind
    return None if ip.is_global else "non-public"


def literal_address(host: str) -> Address | None:
    """The address a host spells, in any of the forms a resolver accepts (dotted, decimal, octal, hex, short),
    or None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))  # 2130706433, 0177.0.0.1, 0x7f.1, 127.1
    except (OSError, UnicodeError):
        return None


def _allowed(host: str, ip: Address | None) -> bool:
    for entry in settings.WEBHOOK_ALLOWED_HOSTS:
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == host:
            return True
        if ip is not None:
            try:
                if ip in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
    return False


def _split(url: str) -> SplitResult:
    parts = urlsplit(url.strip())
    schemes = ("https", "http") if settings.WEBHOOK_ALLOW_HTTP else ("https",)
    if parts.scheme.lower() not in schemes:
        raise ValidationError(NOT_HTTPS, code="webhook_scheme")
    if not parts.hostname:
        raise ValidationError(NO_HOST, code="webhook_host")
    return parts


def _refuse(host: str, addresses: Iterable[Address]) -> None:
    for ip in addresses:
        kind = _kind(ip)
        if kind and not _allowed(host, ip):
            raise ValidationError(FORBIDDEN.format(address=ip, kind=kind), code="webhook_address")


def webhook_url_validate(url: str) -> None:
    """When a URL is saved (a validator): its scheme, and its host if it spells an address or a local name.
    A name is resolved when it is sent (`webhook_target_resolve`), so a later change of its address counts."""
    if not url:
        return
    parts = _split(url)
    host = (parts.hostname or "").lower()
    ip = literal_address(host)
    if ip is not None:
        _refuse(host, [ip])
    elif (host == LOCAL_NAMES[0] or host.endswith(LOCAL_NAMES[1:])) and not _allowed(host, None):
        raise ValidationError(FORBIDDEN.format(address=host, kind="local"), code="webhook_address")


def webhook_target_resolve(url: str) -> tuple[SplitResult, str]:
    """When a URL is sent: (its parts, the one checked address to connect to). Every address the name resolves
    to must pass, or none is used. Raises ValidationError."""
    parts = _split(url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    ip = literal_address(host)
    if ip is not None:
        addresses = [ip]
    else:
        webhook_url_validate(url)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            raise ValidationError(UNRESOLVED.format(host=host), code="webhook_host") from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        if not addresses:
            raise ValidationError(UNRESOLVED.format(host=host), code="webhook_host")
    _refuse(host, addresses)
    return parts, str(addresses[0])
