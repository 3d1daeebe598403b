"""What every outcome provider is (`OutcomeProvider`), and the helpers its webhook parser shares with the others.

A provider's functions are pure: no database, no HTTP framework. Verifying raises `BadSignature` (its message is
safe to show the caller); parsing raises `ValueError` on a malformed body. Events of a kind that says nothing about
how the email landed (processed, deferred, a temporary failure...) are skipped, so a request may yield no event.

Every email carries its ref (`eml_…`) under the custom key `codreamer_ref`; an event without one gets `ref=None`
(counted as unattributed).
"""

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import ValidationError

from app.outcomes.inbound import InboundReply, Limits
from app.outcomes.schemas import BasicAuth, OutcomeEvent

TOLERANCE_S = 300  # a signed timestamp must be within 5 minutes of `now`, either way
REF_KEY = "codreamer_ref"


class BadSignature(Exception):
    """The request is not authenticated: a header is missing, the signature or credentials do not match,
    or the signed timestamp is outside the tolerance. The message says which, and is safe to show."""


class InboundShape(Protocol):
    """A provider's own way of posting an inbound reply (a raw RFC 822 message, which every source takes, needs none).

    Any source's inbound URL takes every provider's shape: the body says which it is (`claims`), not the source.
    """

    @property
    def media(self) -> Literal["json", "form"]:
        """A JSON object, or a form (its text fields)."""
        ...

    @property
    def mark(self) -> str:
        """What `claims` looks for, as a refusal names it ("Mailgun's 'body-mime' or 'message-headers'")."""
        ...

    def claims(self, posted: Mapping[str, Any]) -> bool:
        """Whether the decoded body (a JSON object, or a form's fields as bytes) is this provider's."""
        ...

    def read(self, posted: Mapping[str, Any], body: bytes, *, domain: str, now: datetime | None,
             limits: Limits) -> InboundReply | None:
        """The reply in a body this shape claims (`body` as posted); None when it is no reply. Raises
        `inbound.Refused` when it cannot be read within `limits`."""
        ...


@runtime_checkable
class OutcomeProvider(Protocol):
    """One email provider whose event webhooks and inbound replies feed the outcomes: everything the service asks
    of a source's provider. The registry (`app.outcomes.providers.PROVIDERS`) holds one per `Provider`."""

    @property
    def title(self) -> str:
        """The provider's name, as messages show it."""
        ...

    @property
    def credential(self) -> str | None:
        """The field of `OutcomeSourceCreate` it needs; None when the service makes the credential."""
        ...

    @property
    def inbound(self) -> InboundShape | None:
        """Its own inbound post, if it has one."""
        ...

    def credentials(self, source_id: str, given: str) -> tuple[str, BasicAuth | None]:
        """What is sealed with a new source, and what its answer shows once. `given` is the `credential` field's value
        ("" when it needs none); a ValueError says what is wrong with it (a configuration error, refused at once)."""
        ...

    def verify(self, headers: Mapping[str, str], body: bytes, *, material: str, source_id: str, now: float) -> str | None:
        """Raises BadSignature unless the event webhook's request is the provider's, under the sealed `material`.
        Returns the request's one-time token where the provider signs one (the caller refuses a token seen before)."""
        ...

    def parse(self, headers: Mapping[str, str], body: bytes) -> list[OutcomeEvent]:
        """The event webhook's events, in order, less the kinds that are skipped; ValueError on a malformed body."""
        ...

    def verify_inbound(self, headers: Mapping[str, str], *, material: str, source_id: str) -> None:
        """Raises BadSignature unless an inbound post carries the provider's credentials; a provider that signs no
        inbound post takes its source's unguessable inbound URL as the credential."""
        ...


# --- helpers the providers' parsers share ----------------------------------------------------------------------


def lowered(headers: Mapping[str, str]) -> dict[str, str]:
    """Any mapping (starlette's Headers, a plain dict) as a dict keyed by lower-case names."""
    return {str(name).lower(): value for name, value in headers.items()}


def required_header(headers: dict[str, str], name: str) -> str:
    value = headers.get(name.lower())
    if not value or not value.strip():
        raise BadSignature(f"missing header {name}")
    return value.strip()


def check_timestamp(value: str, *, now: float, tolerance_s: float, what: str) -> None:
    try:
        timestamp = int(value.strip())
    except ValueError:
        raise BadSignature(f"{what} is not a Unix time in seconds") from None
    if now - timestamp > tolerance_s:
        raise BadSignature(f"{what} is too old (more than {tolerance_s:g} s before now): a replay is refused")
    if timestamp - now > tolerance_s:
        raise BadSignature(f"{what} is too far in the future (more than {tolerance_s:g} s after now)")


def json_body(body: bytes, provider: str) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"the {provider} body is not JSON: {error}") from None
    except RecursionError:  # the decoder's own bound, at about a thousand levels: no provider nests that deep
        raise ValueError(f"the {provider} body is nested too deeply to be the provider's JSON") from None


def json_object(body: bytes, provider: str) -> dict:
    payload = json_body(body, provider)
    if not isinstance(payload, dict):
        raise ValueError(f"the {provider} body is not a JSON object")
    return payload


def ref_of(value: Any) -> str | None:
    """The ref as sent, or None when the event carried none (or something that cannot be one)."""
    if isinstance(value, str) and value.strip() and len(value.strip()) <= 500:
        return value.strip()
    return None


def epoch(value: Any, where: str) -> datetime:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{where}: the timestamp is not a Unix time")
    try:
        seconds = float(value)
        if not math.isfinite(seconds):
            raise ValueError
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"{where}: the timestamp {str(value)[:40]!r} is not a Unix time") from None


def iso(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{where}: the time is not an ISO 8601 string")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{where}: the time {value[:40]!r} is not ISO 8601") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def field(record: Mapping[str, Any], key: str, where: str) -> str:
    value = record.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: missing {key!r}")
    return value.strip()


def event(where: str, **fields: Any) -> OutcomeEvent:
    try:
        return OutcomeEvent(**fields)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise ValueError(f"{where}: {problems}") from None
