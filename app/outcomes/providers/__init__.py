"""The outcome providers: one module each (what it needs, how it verifies, how it parses), and the one registry.

A new provider is a module implementing `base.OutcomeProvider`, a `Provider` member and its line in `PROVIDERS`
(tests/unit/test_outcome_provider_registry.py fails while one of them is missing).
"""

import json
from datetime import datetime
from enum import StrEnum
from typing import Any

from app.outcomes.inbound import InboundReply, Limits, Refused, form_fields, parse_reply
from app.outcomes.providers import mailgun, postmark, resend, sendgrid
from app.outcomes.providers.base import OutcomeProvider


class Provider(StrEnum):
    SENDGRID = "sendgrid"
    MAILGUN = "mailgun"
    POSTMARK = "postmark"
    RESEND = "resend"


PROVIDERS: dict[Provider, OutcomeProvider] = {
    Provider.SENDGRID: sendgrid.PROVIDER,
    Provider.MAILGUN: mailgun.PROVIDER,
    Provider.POSTMARK: postmark.PROVIDER,
    Provider.RESEND: resend.PROVIDER,
}


def _json_post(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise Refused("the body is not JSON (a provider's inbound webhook posts a JSON object)") from None


def read_inbound(content_type: str, body: bytes, *, domain: str, now: datetime | None = None,
                 limits: Limits = Limits()) -> InboundReply | None:
    """The reply in whichever shape the inbound route was posted: a provider's own JSON object or form (the body, not
    the source, says whose: the first provider whose shape claims it reads it), or else a raw RFC 822 message. None
    when it is no reply; Refused when it cannot be read within `limits`, or is a JSON object or form no provider's
    shape claims."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json")):
        media, posted, what = "json", _json_post(body), "the JSON body"
    elif kind in ("multipart/form-data", "application/x-www-form-urlencoded"):
        media, posted, what = "form", form_fields(content_type, body, limits), "the form"
    else:
        return parse_reply(body, domain=domain, now=now, limits=limits)
    shapes = [provider.inbound for provider in PROVIDERS.values()
              if provider.inbound is not None and provider.inbound.media == media]
    for shape in shapes:
        if isinstance(posted, dict) and shape.claims(posted):
            return shape.read(posted, body, domain=domain, now=now, limits=limits)
    marks = [shape.mark for shape in shapes]
    raise Refused(f"{what} has {'neither ' if len(marks) > 1 else 'no '}{' nor '.join(marks)}")
