"""Which replies count. Anyone can write to a reply address, and a Message-ID travels with every forward and export, so
a reply counts for an email only when it comes from an address the email went to: compared as keyed hashes, the
address of a draft's prospect or any recipient its sender reported an event of (a delivery, an open, a bounce…). A
reply to the email's plus-address counts as its one recipient's, where it has exactly one; with
REPLY_ACCEPT_RECIPIENT_DOMAIN, a reply from another address at a recipient's domain counts as that recipient's. So a
send has at most one reply (replies are counted per distinct recipient). Any other reply is stored as unverified:
shown, never learned from, evaluated on or promoted on."""

from dataclasses import dataclass, field


def domain_of(address: str) -> str | None:
    """The domain of an address (`priya@Clinica.example` → `clinica.example`); None for a key that is no address."""
    local, at, domain = address.strip().rpartition("@")
    return domain.strip().lower() or None if at and local else None


@dataclass
class Sends:
    """The recipients (keyed hashes) one email went to, and a recipient at each of their domains."""

    recipients: set[str] = field(default_factory=set)
    domains: dict[str, str] = field(default_factory=dict)

    def add(self, recipient: str, domain: str | None) -> None:
        self.recipients.add(recipient)
        if domain is not None and (domain not in self.domains or recipient < self.domains[domain]):
            self.domains[domain] = recipient  # the same one whatever order they came in

    def counted_as(self, sender: str, sender_domain: str | None, *, plus_addressed: bool, accept_domain: bool) -> str | None:
        """The recipient a reply from `sender` (a keyed hash) counts for, or None: unverified."""
        if sender in self.recipients:
            return sender
        if plus_addressed and len(self.recipients) == 1:
            return next(iter(self.recipients))
        if accept_domain and sender_domain is not None and sender_domain in self.domains:
            return self.domains[sender_domain]
        return None
