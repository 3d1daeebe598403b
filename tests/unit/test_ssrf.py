"""Webhook URLs may not reach inside: which addresses count as non-public."""

import ipaddress

import pytest

from app.events.ssrf import blocked


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.0.1", "169.254.169.254", "100.64.1.1", "224.0.0.1", "239.1.2.3",
    "192.0.0.192", "198.18.0.1", "240.0.0.1", "255.255.255.255", "0.0.0.0", "::1", "::", "fe80::1", "fc00::1",
    "ff02::1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:a9fe:a9fe::1", "2001::1", "::ffff:8.8.8.8",
])
def test_non_public_addresses_are_blocked(address):
    assert blocked(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "151.101.1.69"])
def test_public_addresses_pass(address):
    assert not blocked(ipaddress.ip_address(address))
