"""An outcome source: a tenant's connection of one provider's webhooks, as the API takes and shows it. Apart from
`schemas` because it reads the provider registry, whose modules build `schemas`' events."""

from datetime import datetime
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.kit.pages import Page
from app.outcomes.providers import PROVIDERS, Provider
from app.outcomes.schemas import BasicAuth

Secret = Annotated[str, StringConstraints(min_length=8, max_length=4096, strip_whitespace=True)]


class OutcomeSourceCreate(BaseModel):
    """An email provider's webhooks, with what verifies them: SendGrid's `verification_key` (the Event Webhook's
    ECDSA public key, base64), Mailgun's `signing_key` (the HTTP webhook signing key), Resend's `secret` (`whsec_…`);
    Postmark needs none (the answer carries basic-auth credentials for its webhook URL, shown once)."""

    model_config = ConfigDict(extra="forbid")

    provider: Provider
    name: Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)] | None = None
    verification_key: Secret | None = None
    signing_key: Secret | None = None
    secret: Secret | None = None

    CREDENTIALS: ClassVar[tuple[str, ...]] = ("verification_key", "signing_key", "secret")  # each provider's is one

    @model_validator(mode="after")
    def _material_fits_the_provider(self) -> "OutcomeSourceCreate":
        given = {name for name in self.CREDENTIALS if getattr(self, name) is not None}
        needed = PROVIDERS[self.provider].credential
        if needed is not None and needed not in given:
            raise ValueError(f"provider {self.provider.value} needs `{needed}`")
        if given - {needed}:
            raise ValueError(f"provider {self.provider.value} takes no {', '.join(f'`{name}`' for name in sorted(given - {needed}))}")
        return self

    def material(self) -> str:
        """The provider's credential as given ("" for a provider that needs none)."""
        needed = PROVIDERS[self.provider].credential
        return getattr(self, needed) if needed is not None else ""


class OutcomeSourceOut(BaseModel):
    id: str
    provider: Provider
    name: str | None
    url: str = Field(description="Point the provider's event webhook here (no API key: the provider's signature).")
    inbound_url: str = Field(description=(
        "Point inbound mail here: raw RFC 822, SendGrid Inbound Parse (raw message), Mailgun forward() (or `…/mime`), or "
        "Postmark inbound JSON."))
    created_at: datetime

    @classmethod
    def of(cls, source) -> "OutcomeSourceOut":
        return cls(id=source.id, provider=source.provider, name=source.name, url=f"/outcomes/hooks/{source.id}",
                   inbound_url=f"/outcomes/hooks/{source.id}/inbound", created_at=source.created_at)


class OutcomeSourceCreated(OutcomeSourceOut):
    basic_auth: BasicAuth | None = Field(None, description="Postmark only: the webhook URL's credentials, shown this once.")


class OutcomeSourceList(Page[OutcomeSourceOut]):
    pass
