"""API keys and the tenants they belong to.

`API_KEYS` entries are `tenant:key`, `tenant:sha256:<hex digest of the key>` (so plaintext keys
need not sit in configuration), or a bare `key`, which is a tenant of its own. Every run,
uploaded graph and idempotency key belongs to the tenant that created it; another tenant is
told it does not exist. Without API_KEYS (development) every caller is the one open tenant.
"""

import hashlib
import re
import secrets
from dataclasses import dataclass

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

OPEN_TENANT = "public"
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class ApiKey:
    tenant: str
    digest: bytes  # SHA-256 of the key: compared in constant time, never the key itself


def parse_api_keys(entries: list[str]) -> list[ApiKey]:
    """Raises ValueError naming the entry that is malformed (never echoing a key)."""
    keys = []
    for position, entry in enumerate(entries, 1):
        tenant, separator, secret = entry.partition(":")
        if not separator:
            tenant, secret = "", entry
        if secret.startswith("sha256:"):
            hexdigest = secret.removeprefix("sha256:").lower()
            if not _HEX_DIGEST.fullmatch(hexdigest):
                raise ValueError(f"API_KEYS entry {position}: a sha256: key needs 64 hexadecimal digits")
            digest = bytes.fromhex(hexdigest)
        elif secret:
            digest = hashlib.sha256(secret.encode()).digest()
        else:
            raise ValueError(f"API_KEYS entry {position} has no key")
        if tenant and not _TENANT.fullmatch(tenant):
            raise ValueError(f"API_KEYS entry {position}: a tenant name is letters, digits, '.', '_' or '-' (64 at most)")
        keys.append(ApiKey(tenant or f"key-{digest.hex()[:12]}", digest))
    return keys


class ApiKeyAuth:
    """With API_KEYS set, every path but the public ones needs `Authorization: Bearer <key>`.

    Checked before routing, so no body is parsed and nothing is validated for an unknown caller.
    The caller's tenant travels in the request's state.
    """

    def __init__(self, app: ASGIApp, keys: list[ApiKey], public: frozenset[str], public_prefixes: tuple[str, ...]):
        self.app = app
        self.keys = keys
        self.public, self.public_prefixes = public, public_prefixes

    def tenant_of(self, token: bytes) -> str | None:
        digest = hashlib.sha256(token).digest()
        found = None
        for key in self.keys:  # every key is compared, so the time says nothing about which matched
            if secrets.compare_digest(digest, key.digest):
                found = key.tenant
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        scope.setdefault("state", {})["tenant"] = OPEN_TENANT
        path = scope["path"]
        if not self.keys or path in self.public or path.startswith(self.public_prefixes):
            return await self.app(scope, receive, send)
        scheme, _, token = dict(scope["headers"]).get(b"authorization", b"").partition(b" ")
        tenant = self.tenant_of(token) if scheme.lower() == b"bearer" else None
        if tenant is not None:
            scope["state"]["tenant"] = tenant
            return await self.app(scope, receive, send)
        response = JSONResponse({"detail": "missing or invalid API key: send 'Authorization: Bearer <key>'"},
                                status_code=401, headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)
