"""Where a job's notification may go: the address rule, and the one lookup a send uses.

Any principal may schedule a job with a notification URL, and the daemon sends
it from inside the operator's network, so a URL could aim the daemon at
loopback services, the cloud metadata address (169.254.169.254) or a private
network. The rule:

* With ``EXAI_JOBS_NOTIFY_HOSTS`` set, the URL's host must be one it names (by
  name, or as the same address however it is written); a host it names may
  resolve anywhere, since the operator chose it.
* Otherwise any host may be named, but none that is or resolves to an internal
  address: loopback, link-local, private, shared (CGNAT), unspecified,
  multicast or reserved, in IPv4 or IPv6, including the IPv4 address an IPv6
  one carries (``::ffff:127.0.0.1``, 6to4, Teredo, NAT64). Numeric hosts are
  read the way the C library reads them, so ``2130706433``, ``0x7f000001``,
  ``0177.0.0.1`` and ``127.1`` are all loopback.

The rule is checked when a job is made (a name that does not resolve then is
accepted and checked at each send) and again when a notification is sent, on
the address the send will use: :func:`pin` resolves the host once and returns
the URL rewritten to that address, with the name kept for the ``Host`` header
and TLS, so nothing resolves the name again between the check and the connect
(a DNS-rebinding answer gets no second chance). Redirects are never followed.

The rule itself (:func:`literal_address`, :func:`is_internal`,
:func:`url_refused`) is pure; :func:`pin` and :func:`refused_on_lookup` do the
lookup, through a resolver that is passed in.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "Address",
    "NotifyRefusedError",
    "Pinned",
    "Resolver",
    "is_internal",
    "literal_address",
    "pin",
    "refused_on_lookup",
    "system_resolve",
    "url_refused",
]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> the addresses a connection to it could use, as text.
Resolver = Callable[[str, int], Awaitable[list[str]]]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HEX = re.compile(r"0[xX][0-9a-fA-F]*")
_OCTAL = re.compile(r"0[0-7]*")
_DECIMAL = re.compile(r"[1-9][0-9]*")
_ALLOW_HINT = "name it in EXAI_JOBS_NOTIFY_HOSTS to allow it"


class NotifyRefusedError(ValueError):
    """The target breaks the address rule: never sent, never retried."""


def _inet_aton(text: str) -> ipaddress.IPv4Address | None:
    """An IPv4 address in any form ``inet_aton`` accepts (1 to 4 parts, each
    decimal, octal with a leading 0, or hex with 0x; the last fills the rest)."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        if _HEX.fullmatch(part):
            numbers.append(int(part[2:] or "0", 16))
        elif _OCTAL.fullmatch(part):
            numbers.append(int(part, 8))
        elif _DECIMAL.fullmatch(part):
            numbers.append(int(part))
        else:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = last
    for index, number in enumerate(head):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def literal_address(host: str) -> Address | None:
    """``host`` as an address when it is one (any numeric form, IPv6 with or
    without brackets); None when it is a name."""
    text = host.strip().strip("[]")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    return _inet_aton(text) if text and (text[0].isdigit()) else None


def _carried(address: Address) -> list[Address]:
    """The address and every IPv4 address an IPv6 one carries."""
    found: list[Address] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        for inner in (address.ipv4_mapped, address.sixtofour):
            if inner is not None:
                found.append(inner)
        if address.teredo is not None:
            found.extend(address.teredo)
        if address in _NAT64:
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def is_internal(address: Address) -> bool:
    """Whether a notification to ``address`` could reach a machine it should not."""
    for one in _carried(address):
        if not one.is_global or one.is_multicast or one.is_reserved or one.is_unspecified:
            return True
    return False


def _hostname(url: str) -> str:
    return (urlsplit(url).hostname or "").lower().rstrip(".")


def _named(host: str, hosts: Sequence[str]) -> bool:
    """Whether ``EXAI_JOBS_NOTIFY_HOSTS`` names ``host``, by name or as the same address."""
    host = host.lower().rstrip(".")
    own = _plain(literal_address(host))
    for entry in hosts:
        entry = entry.strip().lower().rstrip(".")
        if entry == host:
            return True
        if own is not None and _plain(literal_address(entry)) == own:
            return True
    return False


def _plain(address: Address | None) -> Address | None:
    """An IPv4-mapped IPv6 address as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def url_refused(url: str, hosts: Sequence[str]) -> str | None:
    """Why ``url`` may not be notified, judged from the URL alone; None when it may
    (a name still has to resolve to a public address at each send)."""
    host = _hostname(url)
    if hosts:
        if _named(host, hosts):
            return None
        return f"notification host {host!r} is not in EXAI_JOBS_NOTIFY_HOSTS"
    address = literal_address(host)
    if address is not None and is_internal(address):
        return f"notification host {host!r} is the internal address {address}; {_ALLOW_HINT}"
    return None


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives for ``host`` (its numeric forms included)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _lookup_refusal(host: str, addresses: list[Address]) -> str | None:
    for address in addresses:
        if is_internal(address):
            return (f"notification host {host!r} resolves to {address}, an internal "
                    f"address; {_ALLOW_HINT}")  # fmt: skip
    return None


async def _addresses(host: str, port: int, resolve: Resolver) -> list[Address]:
    literal = literal_address(host)
    if literal is not None:
        return [literal]
    found = [ipaddress.ip_address(a.partition("%")[0]) for a in await resolve(host, port)]
    if not found:
        raise OSError(f"{host!r} has no address")
    return found


async def refused_on_lookup(
    url: str, hosts: Sequence[str], resolve: Resolver = system_resolve, timeout_s: float = 10.0
) -> str | None:
    """At creation: why ``url`` is refused once its host is resolved; None when it is
    not (a name that does not resolve now is checked again at each send)."""
    parts = urlsplit(url)
    host = _hostname(url)
    if _named(host, hosts):
        return None
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme, 80)
        addresses = await asyncio.wait_for(_addresses(host, port, resolve), timeout_s)
    except (OSError, ValueError, TimeoutError):
        return None
    return _lookup_refusal(host, addresses)


@dataclass(frozen=True, slots=True)
class Pinned:
    """A notification URL bound to the one address it will be sent to."""

    url: str  # the URL with its host replaced by ``address``
    host_header: str  # the host (and port) as the URL named it
    sni: str | None  # the name TLS checks the certificate against; None for an address
    address: str


async def pin(url: str, hosts: Sequence[str], resolve: Resolver = system_resolve) -> Pinned:
    """Resolve ``url``'s host once and bind the URL to that address.

    Raises :class:`NotifyRefusedError` when the address rule refuses it, and
    ``OSError`` when the host does not resolve (which may pass: retried).
    """
    refused = url_refused(url, hosts)
    if refused is not None:
        raise NotifyRefusedError(refused)
    parts = urlsplit(url)
    host = _hostname(url)
    port = parts.port or _DEFAULT_PORTS.get(parts.scheme, 80)
    try:
        addresses = await _addresses(host, port, resolve)
    except ValueError as exc:
        raise OSError(f"{host!r} resolved to something that is not an address: {exc}") from None
    if not _named(host, hosts):
        refused = _lookup_refusal(host, addresses)
        if refused is not None:
            raise NotifyRefusedError(refused)
    address = addresses[0]
    shown = f"[{address}]" if address.version == 6 else str(address)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    netloc = f"{userinfo}{at}{shown}" + (f":{parts.port}" if parts.port else "")
    pinned = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    try:
        header = hostport.encode("idna").decode("ascii")
    except UnicodeError:
        header = hostport
    name = None if literal_address(host) is not None else host
    return Pinned(pinned, header, name if parts.scheme == "https" else None, str(address))
