import ipaddress
import os
import subprocess
import sys

import pytest

from app.settings import Settings
from app.events.ssrf import blocked


def test_production_without_api_keys_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "API_KEYS"} | {"ENVIRONMENT": "production"}
    result = subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "serve", "--port", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1
    assert "API_KEYS" in result.stdout + result.stderr and "refusing to start" in result.stdout + result.stderr


def test_postgresql_without_a_shared_secret_key_refuses_to_start():
    """Each process would keep its own key file; the workers could then never sign what the API sealed."""
    from app.lifecycle import StartupError, check

    with pytest.raises(StartupError, match="PostgreSQL DATABASE_URL requires SECRET_KEY"):
        check(Settings(_env_file=None, database_url="postgresql://postgres@127.0.0.1:5432/any", secret_key=None))
    check(Settings(_env_file=None, database_url="postgresql://postgres@127.0.0.1:5432/any", secret_key="shared-by-every-process"))


def test_settings_parse_comma_separated_values():
    settings = Settings(_env_file=None, api_keys=" a, b ,", webhook_retry_schedule="1, 2.5,60")
    assert settings.api_keys == ["a", "b"] and settings.webhook_retry_schedule == [1.0, 2.5, 60.0]
    with pytest.raises(ValueError, match="DATABASE_URL"):
        Settings(_env_file=None, database_url="mysql://x")


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
