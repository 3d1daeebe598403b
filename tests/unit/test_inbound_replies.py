"""Replies from raw MIME messages (app/outcomes/inbound.py): attribution by In-Reply-To, References or a
plus-address, auto-reply detection, and the new text without its quoted history."""

from datetime import UTC, datetime
from email.message import EmailMessage

import pytest

from app.outcomes.inbound import MAX_HEADER_LINE_CHARS, Limits, Refused, new_text, parse_reply, storable_key
from app.outcomes.providers import read_inbound
from app.outcomes.providers.sendgrid import parse_sendgrid_inbound

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


# ---------------------------------------------------------------- issue 37: input any sender controls, bounded


def test_a_line_too_long_to_be_a_header_is_never_cut_as_one():
    """The reply cutter never sees a line over MAX_HEADER_LINE_CHARS (its patterns backtrack quadratically on such a
    line when it starts with "On"): a long line that looks like "On … wrote:" is the reply's own text."""
    long_line = "On " + "we could meet on Tuesday " * 20 + "if that suits you, wrote:"
    assert len(long_line) > MAX_HEADER_LINE_CHARS
    body = f"Thanks!\n\n{long_line}\n> an earlier line\n"
    assert new_text(body) == f"Thanks!\n\n{long_line}"
    # a header line of an ordinary length is still cut, after a long line too
    short = "On Mon, Jan 6, 2025 at 10:00 AM Bob <bob@mail.codreamer.test> wrote:"
    assert new_text(f"Thanks!\n{long_line}\n\n{short}\n> Hi\n") == f"Thanks!\n{long_line}"


def test_a_reply_of_a_megabyte_on_one_line_is_read_in_bounded_text():
    prose = "On " + "we would love to hear more about your pricing " * 20_000  # ~900 KB, one line
    reply = parse_reply(message(prose, In_Reply_To=f"<{REF}@{DOMAIN}>"), domain=DOMAIN, limits=Limits(max_text_chars=4096))
    assert reply.ref == REF and reply.text == prose[:4096].strip()


def test_html_replies_are_read_only_up_to_their_bound():
    email = EmailMessage()
    email["From"], email["To"], email["In-Reply-To"] = "anna@example.com", f"bob@{DOMAIN}", f"<{REF}@{DOMAIN}>"
    email.set_content("<p>Count me in.</p>" + "</" * 500_000, subtype="html")  # html.parser is quadratic on "</"
    reply = parse_reply(email.as_bytes(), domain=DOMAIN, limits=Limits(max_text_chars=2048))
    assert reply.text.startswith("Count me in.") and len(reply.text) <= 2048


def nested(depth: int) -> bytes:
    head = "".join(f'Content-Type: multipart/mixed; boundary="b{i}"\r\n\r\n--b{i}\r\n' for i in range(depth))
    tail = "".join(f"--b{i}--\r\n" for i in reversed(range(depth)))
    return (f"From: anna@example.com\r\nIn-Reply-To: <{REF}@{DOMAIN}>\r\n{head}Content-Type: text/plain\r\n\r\n"
            f"Deep, but fine.\r\n{tail}").encode()


def test_mime_nesting_and_parts_are_bounded():
    assert parse_reply(nested(19), domain=DOMAIN).text == "Deep, but fine."  # the message itself is level 1
    with pytest.raises(Refused, match=r"nested .*deeper than 20 levels .*INBOUND_MAX_MIME_DEPTH"):
        parse_reply(nested(20), domain=DOMAIN)
    with pytest.raises(Refused, match="more than 500 MIME parts"):  # 1,000 deep: refused before the parser recurses
        parse_reply(nested(1000), domain=DOMAIN)
    with pytest.raises(Refused, match="nested too deeply"):  # under the part limit, the parser's recursion is the bound
        parse_reply(nested(1000), domain=DOMAIN, limits=Limits(max_mime_parts=5000))
    parts = "".join("--B\r\nContent-Type: text/plain\r\n\r\nx\r\n" for _ in range(100_000))
    many = f'From: anna@example.com\r\nContent-Type: multipart/mixed; boundary="B"\r\n\r\n{parts}--B--\r\n'.encode()
    with pytest.raises(Refused, match=r"more than 500 MIME parts \(INBOUND_MAX_MIME_PARTS\)"):
        parse_reply(many, domain=DOMAIN)


def test_a_date_out_of_range_once_in_utc_is_the_time_the_reply_came():
    now = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)
    for date in ("Fri, 31 Dec 9999 23:59:59 -1400", "Sat, 01 Jan 10000 00:00:00 +0000"):
        assert parse_reply(message(Date=date), domain=DOMAIN, now=now).occurred_at == now
    assert parse_reply(message(Date="Fri, 31 Dec 9999 09:59:59 -1400"), domain=DOMAIN).occurred_at == \
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)  # the last second there is
    # a zone written with a colon, as some servers (and Postmark's JSON) write it, is a zone, not UTC
    raw = b"From: anna@example.com\r\nDate: Fri, 1 Aug 2014 16:45:32 -04:00\r\n\r\nok\r\n"
    assert parse_reply(raw, domain=DOMAIN).occurred_at == datetime(2014, 8, 1, 20, 45, 32, tzinfo=UTC)


def test_event_ids_are_storable_and_distinct():
    shared = "<" + "a" * 600
    first = parse_reply(message(Message_ID=shared + "1@example.org>"), domain=DOMAIN)
    second = parse_reply(message(Message_ID=shared + "2@example.org>"), domain=DOMAIN)
    assert first.event_id != second.event_id and all(len(r.event_id) <= 500 for r in (first, second))
    assert first.event_id == storable_key(shared + "1@example.org>")  # the same message: the same id, on every retry
    ordinary = parse_reply(message(), domain=DOMAIN)
    assert ordinary.event_id == "<reply-1@example.com>"  # kept as it is
    raw = b"From: anna@example.com\r\nMessage-ID: <a\x00b@example.org>\r\nTo: x@y.z\r\n\r\nok\r\n"
    nul = parse_reply(raw, domain=DOMAIN)
    assert nul.event_id.startswith("sha256:") and "\x00" not in nul.event_id
    eight_bit = [parse_reply(b"From: a@b.c\r\nMessage-ID: <" + id_ + b"@x>\r\n\r\nok", domain=DOMAIN)
                 for id_ in (b"\xff\xfe", b"\xff\xfd")]
    assert eight_bit[0].event_id != eight_bit[1].event_id
    assert storable_key("sha256:" + "0" * 64) != "sha256:" + "0" * 64  # no id passes for another's digest


def test_a_long_or_unstorable_sender_becomes_a_storable_key():
    long_sender = "a" * 600 + "@example.org"
    reply = parse_reply(message(From=long_sender), domain=DOMAIN)
    assert reply.sender == long_sender and storable_key(reply.sender).startswith("sha256:")
    assert storable_key("anna@example.com") == "anna@example.com"


def test_reply_text_has_no_nul():
    reply = parse_reply(message("Yes\x00, let's talk."), domain=DOMAIN)
    assert reply.text == "Yes, let's talk."


# Postmark's inbound webhook, shaped as its documentation's example (fields and their nesting)
POSTMARK = {
    "FromName": "Anna Example", "MessageStream": "inbound", "From": "anna@example.com",
    "FromFull": {"Email": "anna@example.com", "Name": "Anna Example", "MailboxHash": ""},
    "To": f'"Sales" <sales+{REF}@inbound.example.com>',
    "ToFull": [{"Email": f"sales+{REF}@inbound.example.com", "Name": "Sales", "MailboxHash": REF}],
    "Cc": "", "CcFull": [], "Bcc": "", "BccFull": [], "OriginalRecipient": f"sales+{REF}@inbound.example.com",
    "Subject": "Re: A demo?", "MessageID": "22c74902-a0c1-4511-804f-341342852c90", "ReplyTo": "",
    "MailboxHash": REF, "Date": "Thu, 5 Apr 2012 16:59:01 +0200",
    "TextBody": "Tuesday works.\n\nOn Mon, Apr 2, 2012 at 9:00 AM Sales <sales@example.com> wrote:\n> A demo?",
    "HtmlBody": "<p>Tuesday works.</p>", "StrippedTextReply": "Tuesday works.", "Tag": "",
    "Headers": [{"Name": "X-Spam-Status", "Value": "No"}, {"Name": "Message-ID", "Value": "<CAE-anna-1@mail.gmail.com>"},
                {"Name": "In-Reply-To", "Value": f"<{OTHER}@{DOMAIN}>"}],
    "Attachments": [],
}


def test_postmark_inbound_json():
    import json

    reply = read_inbound("application/json", json.dumps(POSTMARK).encode(), domain=DOMAIN)
    assert (reply.ref, reply.event_id, reply.sender, reply.auto) == (OTHER, "<CAE-anna-1@mail.gmail.com>",
                                                                     "anna@example.com", False)
    assert reply.text == "Tuesday works." and reply.occurred_at == datetime(2012, 4, 5, 14, 59, 1, tzinfo=UTC)
    # no In-Reply-To of ours: the plus-address (MailboxHash); no Message-ID header: Postmark's MessageID
    plain = POSTMARK | {"Headers": [{"Name": "Auto-Submitted", "Value": "auto-replied"}], "To": "sales@example.com",
                        "OriginalRecipient": "", "TextBody": "", "StrippedTextReply": ""}
    reply = read_inbound("application/json", json.dumps(plain).encode(), domain=DOMAIN)
    assert (reply.ref, reply.event_id, reply.auto) == (REF, "postmark:22c74902-a0c1-4511-804f-341342852c90", True)
    assert reply.text == "Tuesday works."  # HtmlBody when there is no TextBody
    for body in (b"[1, 2]", b'{"RecordType": "Delivery"}', b"not json"):
        with pytest.raises(Refused):
            read_inbound("application/json", body, domain=DOMAIN)


# Mailgun's route forward, as its documentation lists the fields: parsed, or raw MIME when the URL ends with "mime"
MAILGUN_PARSED = {
    "recipient": f"sales+{REF}@mg.example.com", "sender": "anna@example.com", "from": "Anna Example <anna@example.com>",
    "subject": "Re: A demo?", "body-plain": "Sounds good.\n\nOn Mon, Jan 6, 2025 at 10:00 AM Bob wrote:\n> Hi",
    "stripped-text": "Sounds good.", "body-html": "<p>Sounds good.</p>", "timestamp": "1736200000",
    "token": "a" * 50, "signature": "0" * 64,
    "message-headers": '[["Message-Id", "<mg-anna-1@mail.gmail.com>"], ["In-Reply-To", "<' + OTHER + "@" + DOMAIN
                       + '>"], ["Date", "Tue, 07 Jan 2025 18:14:51 +0100"], ["From", "Anna Example <anna@example.com>"]]',
}


def test_mailgun_route_forward_parsed_and_raw_mime():
    from urllib.parse import urlencode

    form = urlencode(MAILGUN_PARSED).encode()
    reply = read_inbound("application/x-www-form-urlencoded", form, domain=DOMAIN)
    assert (reply.ref, reply.event_id, reply.sender, reply.text) == (OTHER, "<mg-anna-1@mail.gmail.com>",
                                                                     "anna@example.com", "Sounds good.")
    assert reply.occurred_at == datetime(2025, 1, 7, 17, 14, 51, tzinfo=UTC)
    # the envelope recipient's plus-address, when no In-Reply-To names one of ours
    no_thread = MAILGUN_PARSED | {"message-headers": '[["Message-Id", "<mg-2@x>"]]'}
    assert read_inbound("application/x-www-form-urlencoded", urlencode(no_thread).encode(), domain=DOMAIN).ref == REF
    # raw MIME, multipart/form-data (Mailgun's forward to a URL ending in "mime")
    boundary = "mgboundary"
    fields = {"recipient": "sales@mg.example.com", "sender": "anna@example.com", "body-mime": GMAIL_REPLY.decode()}
    body = "".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
                   for name, value in fields.items()) + f"--{boundary}--\r\n"
    reply = read_inbound(f"multipart/form-data; boundary={boundary}", body.encode(), domain=DOMAIN)
    assert reply.ref == REF and reply.text == "Sounds good \u2014 Tuesday at 10 works for me.\n\nAnna"


def test_a_form_of_neither_provider_is_refused():
    with pytest.raises(Refused, match="neither SendGrid Inbound Parse's 'email' field"):
        read_inbound("application/x-www-form-urlencoded", b"text=no+raw+message", domain=DOMAIN)
    with pytest.raises(Refused, match="no readable form"):
        read_inbound("multipart/form-data", b"--x\r\n", domain=DOMAIN)  # no boundary
    many = "&".join(f"f{i}=v" for i in range(1000)).encode()
    with pytest.raises(Refused):
        read_inbound("application/x-www-form-urlencoded", many, domain=DOMAIN)
