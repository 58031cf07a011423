"""The one way to send HTTP to a user-supplied URL: timeouts, no redirects, a capped
response, and a guard against private, loopback and link-local addresses (IPv4 ones wrapped
in IPv6 included: mapped, compatible, NAT64, 6to4).

The host is resolved once, every address is checked, and the connection goes to the
checked address (TLS still verifies the host name), so DNS rebinding between the check and
the connect cannot reach an internal service. ALERTS_OUTBOUND_ALLOW (CIDRs) lets
addresses through anyway: the tests' loopback receivers, or an on-premises chat server.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import urllib3
from django.conf import settings

MAX_RESPONSE_BYTES = 64 * 1024
USER_AGENT = "costplatform-alerts/1"
_pools: dict[str, urllib3.PoolManager] = {}


class OutboundError(Exception):
    """A request that did not get an HTTP answer. The message never contains the URL (it may hold a token)."""

    def __init__(self, message: str, *, blocked: bool = False) -> None:
        super().__init__(message)
        self.blocked = blocked


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def _allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(cidr, strict=False) for cidr in settings.ALERTS_OUTBOUND_ALLOW]


# IPv6 forms that carry an IPv4 address in their last 32 bits, which is where the packet ends
# up (a NAT64 gateway or the host's own stack translates it): IPv4-compatible (::a.b.c.d),
# SIIT-translated (::ffff:0:a.b.c.d) and NAT64's well-known prefix (64:ff9b::a.b.c.d).
# IPv4-mapped (::ffff:a.b.c.d) and 6to4 (2002:aabb:ccdd::) have their own properties.
_LAST_32_BITS = tuple(ipaddress.IPv6Network(n) for n in ("::/96", "::ffff:0:0:0/96", "64:ff9b::/96"))
# RFC 8215's local-use NAT64 prefix: the gateway's own network, never a public address.
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address wraps (mapped, compatible, translated, NAT64, 6to4)."""
    if ip.ipv4_mapped or ip.sixtofour:
        return ip.ipv4_mapped or ip.sixtofour
    if any(ip in net for net in _LAST_32_BITS) and int(ip) > 1:  # :: and ::1 are IPv6's own
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_blocked(address: str) -> bool:
    """True for addresses a user-supplied URL must not reach, unless allow-listed. An IPv6
    address that wraps an IPv4 one is judged by the IPv4 address inside."""
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _LOCAL_NAT64:
            return not any(ip in net for net in _allowed_networks())
        ip = embedded_ipv4(ip) or ip
    if any(ip in net for net in _allowed_networks()):
        return False
    return not ip.is_global or ip.is_multicast


def resolve_checked(host: str, port: int) -> str:
    """The first address of `host`, after checking all of them."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OutboundError(f"cannot resolve the host ({exc.strerror})") from None
    addresses = [str(info[4][0]) for info in infos]
    if not addresses or any(address_blocked(a) for a in addresses):
        raise OutboundError("the URL points to a private or loopback address", blocked=True)
    return addresses[0]


def _pool(timeout: float) -> urllib3.PoolManager:
    key = str(timeout)
    if key not in _pools:
        _pools[key] = urllib3.PoolManager(num_pools=50, maxsize=4, retries=False, timeout=timeout)
    return _pools[key]


def post(url: str, *, body: bytes, headers: dict[str, str] | None = None, timeout: float | None = None) -> Response:
    """POST `body` to `url`; raises OutboundError for anything that is not an HTTP answer."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise OutboundError("the URL must be http:// or https:// with a host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = resolve_checked(parts.hostname, port)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    all_headers = {"User-Agent": USER_AGENT, "Host": parts.netloc.rsplit("@", 1)[-1], **(headers or {})}
    timeout = timeout or settings.ALERTS_HTTP_TIMEOUT
    tls = {"server_hostname": parts.hostname, "assert_hostname": parts.hostname} if parts.scheme == "https" else {}
    try:
        pool = _pool(timeout).connection_from_host(address, port, parts.scheme, pool_kwargs=tls)
        response = pool.urlopen(
            "POST", path, body=body, headers=all_headers, redirect=False, retries=False, preload_content=False
        )
        data = response.read(MAX_RESPONSE_BYTES, decode_content=True)
        response.release_conn()
    except urllib3.exceptions.TimeoutError:
        raise OutboundError(f"timed out after {timeout:g} s") from None
    except urllib3.exceptions.HTTPError as exc:
        raise OutboundError(f"connection failed ({type(exc).__name__})") from None
    return Response(status=response.status, body=data, headers=dict(response.headers))
