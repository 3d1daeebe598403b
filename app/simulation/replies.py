"""What a simulated reader writes back, by the kind of reply: several phrasings each, as people write them.

These are the texts a reply classifier reads; they name no category and carry no marker a real reply would not.
"""

from datetime import date

import numpy as np

from app.simulation.kinds import ReplyKind

TEXTS: dict[ReplyKind, tuple[str, ...]] = {
    ReplyKind.MEETING: (
        "Hi {sender},\n\nGood timing, this is on my list for this quarter. Can we talk Thursday or Friday afternoon? "
        "Send me a calendar invite for 30 minutes.\n\n{first}",
        "{sender} - yes, let's set up a call. I'm free Tuesday after 2pm or Wednesday morning.\n\nThanks,\n{first}",
        "Hi {sender}, happy to take a look. Could you book something with my assistant for next week? "
        "Any slot works.\n\nBest regards,\n{first}",
    ),
    ReplyKind.INTERESTED: (
        "Hi {sender},\n\nThis is relevant for us right now. Can you send more details and a rough idea of cost?\n\n"
        "{first}",
        "Thanks {sender}, interesting. We have been looking at exactly this. What would a next step look like?\n\n"
        "Cheers,\n{first}",
        "{sender},\n\nI'd like to learn more. Please send over the case study you mentioned and I'll share it with "
        "my team.\n\nRegards,\n{first}",
    ),
    ReplyKind.QUESTION: (
        "Hi {sender}, does this work if our warehouse is still on-prem for part of the data?\n\n{first}",
        "Quick question before anything else: how long does setup usually take, and who on our side would need to be "
        "involved?\n\n{first}",
        "{sender}, how is this different from the monitoring we already get from our cloud vendor?\n\nThanks,\n{first}",
    ),
    ReplyKind.NOT_INTERESTED: (
        "Hi {sender},\n\nThanks, but we're not looking at anything in this area at the moment.\n\n{first}",
        "Not a priority for us this year. Good luck.\n\n{first}",
        "{sender}, we already have a solution for this and are happy with it. Thanks anyway.\n\n{first}",
    ),
    ReplyKind.UNSUBSCRIBE: (
        "Please remove me from your mailing list.\n\n{first}",
        "Stop emailing me. Unsubscribe.",
        "Take me off this list, I did not sign up for this.\n\n{first}",
    ),
    ReplyKind.REFERRAL: (
        "Hi {sender},\n\nI'm not the right person for this, but {colleague} on our data team owns it. I've copied "
        "them here.\n\n{first}",
        "{sender}, this sits with {colleague} now, reach out to them directly.\n\nBest,\n{first}",
    ),
    ReplyKind.WRONG_PERSON: (
        "Hi {sender},\n\nI don't handle this, and I'm not sure who does. Sorry.\n\n{first}",
        "Wrong person, I moved to a different role last year.\n\n{first}",
    ),
    ReplyKind.OUT_OF_OFFICE: (
        "Thank you for your email. I am out of the office until {returns} with limited access to email. "
        "I will respond when I return.\n\n{first}",
        "I'm currently away and will be back on {returns}. For anything urgent please contact the main office.\n\n"
        "{first}",
        "Automatic reply: I am on leave and return on {returns}. Your message has not been forwarded.",
    ),
}
COLLEAGUES = ("Maren Holt", "Tobias Reyes", "Priyanka Das", "Oren Feld", "Greta Lind", "Samir Kaur")


def write_reply(kind: ReplyKind, rng: np.random.Generator, first: str, sender: str, returns_on: date | None) -> str:
    """A reply of `kind`, signed by the reader `first` to the sender's first name `sender`."""
    options = TEXTS[kind]
    text = options[int(rng.integers(len(options)))]
    returns = f"{returns_on:%A %d %B %Y}" if returns_on else ""
    return text.format(sender=sender or "there", first=first, colleague=COLLEAGUES[int(rng.integers(len(COLLEAGUES)))],
                       returns=returns)
