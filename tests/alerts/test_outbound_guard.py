"""The outbound guard sees through IPv6 addresses that wrap an IPv4 one: a channel URL of
[64:ff9b::10.0.0.1] (NAT64), [2002:a00:1::] (6to4), [::10.0.0.1] (IPv4-compatible),
[::ffff:0:10.0.0.1] (SIIT) or [::ffff:10.0.0.1] (IPv4-mapped) is the private address inside."""

from __future__ import annotations

import pytest

from apps.alerts import http, services
from apps.alerts.models import Notification
from tests import factories

WRAPPED_PRIVATE = {
    "nat64": "64:ff9b::a00:1",  # 10.0.0.1
    "nat64-loopback": "64:ff9b::7f00:1",  # 127.0.0.1
    "nat64-local-use": "64:ff9b:1::a00:1",  # RFC 8215, never public
    "6to4": "2002:a00:1::1",  # 10.0.0.1
    "6to4-link-local": "2002:a9fe:a9fe::",  # 169.254.169.254, the cloud metadata service
    "ipv4-compatible": "::a00:1",  # 10.0.0.1
    "ipv4-compatible-loopback": "::7f00:1",  # 127.0.0.1
    "siit": "::ffff:0:c0a8:101",  # 192.168.1.1
    "ipv4-mapped": "::ffff:a00:1",  # 10.0.0.1
}
WRAPPED_PUBLIC = {"nat64": "64:ff9b::808:808", "6to4": "2002:808:808::1", "ipv4-mapped": "::ffff:808:808"}


@pytest.mark.parametrize("address", WRAPPED_PRIVATE.values(), ids=WRAPPED_PRIVATE.keys())
def test_it_refuses_a_private_ipv4_address_wrapped_in_ipv6(address: str, settings) -> None:
    settings.ALERTS_OUTBOUND_ALLOW = []

    assert http.address_blocked(address)
    with pytest.raises(http.OutboundError) as refused:
        http.resolve_checked(address, 443)  # a literal: resolved without a lookup, nothing is sent
    assert refused.value.blocked and "private or loopback" in str(refused.value)


@pytest.mark.parametrize("address", WRAPPED_PUBLIC.values(), ids=WRAPPED_PUBLIC.keys())
def test_it_lets_a_public_ipv4_address_wrapped_in_ipv6_through(address: str, settings) -> None:
    settings.ALERTS_OUTBOUND_ALLOW = []

    assert not http.address_blocked(address)


def test_it_judges_the_wrapped_address_against_the_allow_list(settings) -> None:
    settings.ALERTS_OUTBOUND_ALLOW = ["10.0.0.0/8"]

    assert not http.address_blocked("64:ff9b::a00:1") and not http.address_blocked("2002:a00:1::")
    assert http.address_blocked("64:ff9b::c0a8:101")  # 192.168.1.1: not in the list


@pytest.mark.django_db
@pytest.mark.parametrize("address", ["64:ff9b::7f00:1", "2002:7f00:1::", "::7f00:1"], ids=["nat64", "6to4", "compat"])
def test_it_disables_a_channel_whose_url_wraps_loopback(address: str, settings) -> None:
    # The whole delivery path: the send is refused before any connection, as permanent.
    settings.ALERTS_OUTBOUND_ALLOW = []
    channel = factories.channel("webhook", url=f"http://[{address}]:9/hook")
    [notification] = services.broadcast(
        title="t", body_markdown="b", link="", business_line=None, severity="warning", kind="audit"
    )

    services.notification_send(notification_id=notification.id, retry_delays=[1.0])

    channel.refresh_from_db()
    assert "private or loopback" in channel.disabled_reason
    assert "private or loopback" in Notification.objects.get(pk=notification.pk).error
