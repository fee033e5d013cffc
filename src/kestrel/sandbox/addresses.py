"""Which IP addresses are public: the only ones the egress proxy reaches for a listed name.

Every block of the IANA special-purpose address registries (IPv4 and IPv6) counts as not
public: private networks, loopback, link-local, carrier-grade NAT, documentation, benchmarking,
multicast, reserved space. IPv6 forms that carry an IPv4 address (IPv4-mapped, NAT64, 6to4) are
judged by the IPv4 address inside them, since that is where a packet ends up.
"""

from __future__ import annotations

import ipaddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

NON_PUBLIC_V4: tuple[ipaddress.IPv4Network, ...] = tuple(
    ipaddress.IPv4Network(block)
    for block in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # carrier-grade NAT (shared address space)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local (cloud metadata services live here)
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "192.31.196.0/24",  # AS112
        "192.52.193.0/24",  # AMT
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",  # private
        "192.175.48.0/24",  # direct delegation AS112
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and 255.255.255.255 (limited broadcast)
    )
)
"""IPv4 blocks that are not public."""

NON_PUBLIC_V6: tuple[ipaddress.IPv6Network, ...] = tuple(
    ipaddress.IPv6Network(block)
    for block in (
        "::/128",  # unspecified
        "::1/128",  # loopback
        "::/96",  # IPv4-compatible (deprecated)
        "100::/64",  # discard-only
        "2001::/23",  # IETF protocol assignments (Teredo, ORCHID, benchmarking...)
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation
        "5f00::/16",  # segment routing SIDs
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)
"""IPv6 blocks that are not public (the forms that embed IPv4 are judged apart)."""

MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")


def parse(text: str) -> IPAddress | None:
    """`text` as an IP address (brackets and a zone index allowed), or None if it is not one."""
    try:
        return ipaddress.ip_address(text.strip().strip("[]").split("%")[0])
    except ValueError:
        return None


def embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, NAT64 or 6to4 address leads to, if it is one."""
    if ip in MAPPED:
        return ip.ipv4_mapped
    if ip in NAT64[0]:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in NAT64[1]:
        # Local-use NAT64 (RFC 8215): the prefix may be any length up to /96, so the IPv4
        # address cannot be told apart: such an address is never judged public.
        return ipaddress.IPv4Address(0)
    if ip in SIX_TO_FOUR:
        return ip.sixtofour
    return None


def is_public(address: str | IPAddress) -> bool:
    """Whether `address` is a public unicast address (text that is not an address is not)."""
    ip = parse(address) if isinstance(address, str) else address
    if ip is None:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_v4(ip)
        if inner is not None:
            return is_public(inner)
        return not any(ip in block for block in NON_PUBLIC_V6)
    return not any(ip in block for block in NON_PUBLIC_V4)
