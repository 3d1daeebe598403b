"""Replies from raw MIME messages (app/outcomes/inbound.py): attribution by In-Reply-To, References or a
plus-address, auto-reply detection, and the new text without its quoted history."""

from datetime import UTC, datetime
from email.message import EmailMessage

import pytest

from app.outcomes.inbound import parse_reply, parse_sendgrid_inbound

DOMAIN = "mail.codreamer.test"
REF = "eml_k3j4h5g6f7d8s9a0q1w2"
OTHER = "eml_a1b2c3d4e5f6g7h8j9k0"

# A reply as Gmail writes it: multipart/alternative, the quoted email under "On … wrote:".
GMAIL_REPLY = f"""\
Delivered-To: bob@{DOMAIN}
Received: by 2002:a05:6a10:1234 with SMTP id abc; Tue, 7 Jan 2025 09:15:02 -0800 (PST)
MIME-Version: 1.0
References: <{REF}@{DOMAIN}>
In-Reply-To: <{REF}@{DOMAIN}>
From: Anna Example <anna@example.com>
Date: Tue, 7 Jan 2025 18:14:51 +0100
Message-ID: <CAHx7=abc123+XyZ@mail.gmail.com>
Subject: Re: A demo?
To: Bob Smith <bob@{DOMAIN}>
Content-Type: multipart/alternative; boundary="000000000000a1b2c3d4e5f6"

--000000000000a1b2c3d4e5f6
Content-Type: text/plain; charset="UTF-8"
Content-Transfer-Encoding: quoted-printable

Sounds good =E2=80=94 Tuesday at 10 works for me.

Anna

On Mon, Jan 6, 2025 at 10:00=E2=80=AFAM Bob Smith <bob@{DOMAIN}> wrote:

> Hi Anna,
>
> Would you have 20 minutes for a demo next week?
>
> Bob
>

--000000000000a1b2c3d4e5f6
Content-Type: text/html; charset="UTF-8"
Content-Transfer-Encoding: quoted-printable

<div dir=3D"ltr">Sounds good =E2=80=94 Tuesday at 10 works for me.<div><br></di=
v><div>Anna</div></div><br><div class=3D"gmail_quote"><div dir=3D"ltr" class=
=3D"gmail_attr">On Mon, Jan 6, 2025 at 10:00=E2=80=AFAM Bob Smith &lt;<a href=
=3D"mailto:bob@{DOMAIN}">bob@{DOMAIN}</a>&gt; wrote:<br></div><blockquote c=
lass=3D"gmail_quote">Hi Anna,<br>Would you have 20 minutes for a demo next we=
ek?<br>Bob</blockquote></div>

--000000000000a1b2c3d4e5f6--
""".replace("\n", "\r\n").encode()


def message(body: str = "Thanks, interested.", **headers: str) -> bytes:
    email = EmailMessage()
    email["From"] = headers.pop("From", "Anna Example <anna@example.com>")
    email["To"] = headers.pop("To", f"Bob <bob@{DOMAIN}>")
    email["Subject"] = headers.pop("Subject", "Re: A demo?")
    email["Date"] = headers.pop("Date", "Tue, 07 Jan 2025 18:14:51 +0100")
    email["Message-ID"] = headers.pop("Message_ID", "<reply-1@example.com>")
    for name, value in headers.items():
        email[name.replace("_", "-")] = value
    email.set_content(body)
    return email.as_bytes()


def test_gmail_multipart_alternative_reply():
    reply = parse_reply(GMAIL_REPLY, domain=DOMAIN)
    assert reply.ref == REF and reply.auto is False
    assert reply.message_id == "<CAHx7=abc123+XyZ@mail.gmail.com>" and reply.sender == "anna@example.com"
    assert reply.occurred_at == datetime(2025, 1, 7, 17, 14, 51, tzinfo=UTC)
    assert reply.text == "Sounds good \u2014 Tuesday at 10 works for me.\n\nAnna"  # the text/plain part, quote cut


def test_in_reply_to_is_preferred_to_references():
    raw = message(In_Reply_To=f"<{REF}@{DOMAIN}>", References=f"<{OTHER}@{DOMAIN}> <{REF}@{DOMAIN}>")
    assert parse_reply(raw, domain=DOMAIN).ref == REF


def test_references_match_when_in_reply_to_names_another_message():
    # replying to a colleague's forward: In-Reply-To is theirs, References keeps the thread's first email
    folded = f"References: <{REF}@{DOMAIN}>\n <CAfwd123@mail.gmail.com>\n".encode()  # folded over two lines
    raw = folded + message(In_Reply_To="<CAfwd123@mail.gmail.com>")
    assert parse_reply(raw, domain=DOMAIN).ref == REF


def test_message_ids_of_another_domain_do_not_count():
    raw = message(In_Reply_To=f"<{REF}@elsewhere.example>", References=f"<{REF}@elsewhere.example>")
    assert parse_reply(raw, domain=DOMAIN).ref is None
    # the domain compares case-insensitively
    assert parse_reply(message(In_Reply_To=f"<{REF}@MAIL.CoDreamer.test>"), domain=DOMAIN).ref == REF


def test_plus_address_match():
    assert parse_reply(message(To=f"Bob <bob+{REF}@{DOMAIN}>"), domain=DOMAIN).ref == REF
    assert parse_reply(message(To="team@example.com", Cc=f"replies+{REF}@in.codreamer.test"),
                       domain=DOMAIN).ref == REF
    delivered = message(To="Bob <bob@example.com>", Delivered_To=f"bob+{REF}@{DOMAIN}")
    assert parse_reply(delivered, domain=DOMAIN).ref == REF
    # a Message-ID match wins over a plus-address
    both = message(To=f"bob+{OTHER}@{DOMAIN}", In_Reply_To=f"<{REF}@{DOMAIN}>")
    assert parse_reply(both, domain=DOMAIN).ref == REF


def test_no_ref_anywhere():
    reply = parse_reply(message(In_Reply_To="<something@example.com>"), domain=DOMAIN)
    assert reply is not None and reply.ref is None and reply.text == "Thanks, interested."


@pytest.mark.parametrize("header, value, auto", [
    ("Auto-Submitted", "auto-replied", True),
    ("Auto-Submitted", "auto-generated; owner-email=anna@example.com", True),
    ("Auto-Submitted", "no", False),
    ("Auto-Submitted", "No", False),
    ("X-Autoreply", "yes", True),
    ("X-Autorespond", "Out of office", True),
    ("Precedence", "auto_reply", True),
    ("Precedence", "bulk", True),
    ("Precedence", "junk", True),
    ("Precedence", "list", False),
])
def test_auto_reply_headers(header, value, auto):
    raw = message("I am out of the office until Monday.", In_Reply_To=f"<{REF}@{DOMAIN}>",
                  **{header.replace("-", "_"): value})
    reply = parse_reply(raw, domain=DOMAIN)
    assert reply.auto is auto and reply.ref == REF


def test_a_plain_reply_is_not_auto():
    assert parse_reply(message(In_Reply_To=f"<{REF}@{DOMAIN}>"), domain=DOMAIN).auto is False


@pytest.mark.parametrize("body", [
    "Yes, let's talk.\n\nOn Mon, Jan 6, 2025 at 10:00 AM Bob Smith <bob@mail.codreamer.test> wrote:\n> Hi Anna,\n"
    "> Would you like a demo?\n",
    "Yes, let's talk.\n\n> Hi Anna,\n> Would you like a demo?\n",
    "Yes, let's talk.\n\n-----Original Message-----\nFrom: Bob Smith <bob@mail.codreamer.test>\n"
    "Sent: Monday, January 6, 2025 10:00 AM\nTo: Anna <anna@example.com>\nSubject: A demo?\n\nHi Anna,\n",
    "Yes, let's talk.\n\nFrom: Bob Smith <bob@mail.codreamer.test>\nSent: Monday, January 6, 2025 10:00 AM\n"
    "To: Anna <anna@example.com>\nSubject: A demo?\n\nHi Anna,\n",
    "Yes, let's talk.\n\nAm Mo., 6. Jan. 2025 um 10:00 Uhr schrieb Bob Smith <bob@mail.codreamer.test>:\n> Hallo\n",
])
def test_quoted_text_is_stripped(body):
    reply = parse_reply(message(body, In_Reply_To=f"<{REF}@{DOMAIN}>"), domain=DOMAIN)
    assert reply.text == "Yes, let's talk."


def test_html_only_reply_drops_the_blockquote():
    email = EmailMessage()
    email["From"], email["To"], email["In-Reply-To"] = "anna@example.com", f"bob@{DOMAIN}", f"<{REF}@{DOMAIN}>"
    email.set_content("<html><head><style>p {color: red}</style></head><body><p>Count me in.</p>"
                      "<blockquote>Hi Anna, would you like a demo?</blockquote></body></html>", subtype="html")
    reply = parse_reply(email.as_bytes(), domain=DOMAIN)
    assert reply.text == "Count me in." and reply.ref == REF


def test_missing_or_naive_date():
    email = EmailMessage()
    email["From"], email["To"] = "anna@example.com", f"bob+{REF}@{DOMAIN}"
    email.set_content("ok")
    now = datetime(2025, 1, 8, 12, 0, tzinfo=UTC)
    reply = parse_reply(email.as_bytes(), domain=DOMAIN, now=now)
    assert reply.occurred_at == now and reply.message_id is None
    naive = message(Date="Tue, 07 Jan 2025 18:14:51 -0000")
    assert parse_reply(naive, domain=DOMAIN).occurred_at == datetime(2025, 1, 7, 18, 14, 51, tzinfo=UTC)


def test_not_a_reply():
    assert parse_reply(b"", domain=DOMAIN) is None
    assert parse_reply(b"just some bytes\r\n", domain=DOMAIN) is None
    report = EmailMessage()
    report["From"], report["To"] = "MAILER-DAEMON@example.com", f"bob@{DOMAIN}"
    report.set_content("Delivery failed")
    report.replace_header("Content-Type", 'multipart/report; report-type=delivery-status; boundary="b"')
    assert parse_reply(report.as_bytes(), domain=DOMAIN) is None


def test_sendgrid_inbound_parse_raw_field():
    raw = GMAIL_REPLY.decode()
    form = {"email": raw, "to": f"bob@{DOMAIN}", "from": "Anna Example <anna@example.com>",
            "subject": "Re: A demo?", "dkim": "{@gmail.com : pass}", "SPF": "pass",
            "charsets": '{"to":"UTF-8","from":"UTF-8","subject":"UTF-8"}', "envelope":
            f'{{"to":["bob@{DOMAIN}"],"from":"anna@example.com"}}', "sender_ip": "209.85.128.41"}
    assert parse_sendgrid_inbound(form) == GMAIL_REPLY
    assert parse_reply(parse_sendgrid_inbound(form), domain=DOMAIN).ref == REF
    assert parse_sendgrid_inbound({"email": GMAIL_REPLY}) == GMAIL_REPLY
    for form in ({}, {"email": ""}, {"text": "parsed fields only", "to": f"bob@{DOMAIN}"}):
        with pytest.raises(ValueError, match="no 'email' field"):
            parse_sendgrid_inbound(form)


def test_malformed_headers_do_not_break_parsing():
    """policy.default's structured parser raises on some malformed ids and addresses: those fall back to the
    raw header text, and an 8-bit UTF-8 header still decodes."""
    raw = (f"From: =?utf-8?q?Smith=2C_Ann=C3=A9?= <anna@example.com>\r\nTo: <<<>>>\r\nMessage-ID: <<>>@@\r\n"
           f"References: <{REF}@{DOMAIN}>\r\nDate: not a date\r\nContent-Type: text/plain; charset=utf-8\r\n"
           "Content-Transfer-Encoding: 8bit\r\n\r\nD\u00e9j\u00e0 vu, let's talk.").encode()
    reply = parse_reply(raw, domain=DOMAIN, now=datetime(2025, 1, 8, tzinfo=UTC))
    assert (reply.ref, reply.message_id, reply.sender) == (REF, "<<>>@@", "anna@example.com")
    assert reply.text == "D\u00e9j\u00e0 vu, let's talk." and reply.occurred_at == datetime(2025, 1, 8, tzinfo=UTC)
