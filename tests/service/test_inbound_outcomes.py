"""Inbound replies through the app (issue 37), on SQLite and PostgreSQL: what a sender controls (dates, Message-IDs,
From, MIME nesting, size) is stored or refused with a 4xx, never a 500; Postmark's inbound JSON and Mailgun's route
forward are replies; two Message-IDs sharing their first 500 characters are two replies."""

import base64
import json
import os
from email.message import EmailMessage
from urllib.parse import urlencode

from tests.service.test_outcomes import outcomes_of, sent_to, world  # noqa: F401 (world: the module's fixture)

RFC822 = {"Content-Type": "message/rfc822"}


async def first_email(alice, run_id: str) -> dict:
    return (await alice.get(f"/runs/{run_id}/iterations/1")).json()["email"]


def reply_to(email: dict, message_id: str, body: str = "Yes, Thursday works.", **headers: str) -> bytes:
    message = EmailMessage()
    message["From"] = headers.pop("From", "Priya Raman <priya@saint-aldric.example>")
    message["To"], message["Message-ID"] = "sales@example.com", message_id
    message["In-Reply-To"], message["Subject"] = email["message_id"], "Re: " + email["subject"]
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(body)
    return message.as_bytes()


def raw_reply(email: dict, sender: str, *header_lines: str, body: str = "Yes.") -> bytes:
    """A message written byte for byte (EmailMessage would refuse or rewrite these headers)."""
    return "\r\n".join([f"From: {sender}", "To: sales@example.com", f"In-Reply-To: {email['message_id']}",
                        *header_lines, "Content-Type: text/plain; charset=utf-8", "", body]).encode()


async def mailgun_inbound(alice) -> str:
    source = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": "k" * 32})).json()
    return source["inbound_url"]


async def test_a_date_out_of_range_once_in_utc_is_stored_dated_when_it_came(world):
    alice, _, run_id = world
    email = await first_email(alice, run_id)
    raw = raw_reply(email, "dana@example.org", "Message-ID: <date@x>", "Date: Fri, 31 Dec 9999 23:59:59 -1400")
    answer = await alice.post(await mailgun_inbound(alice), content=raw, headers=RFC822)
    assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text


async def test_a_nul_in_the_message_id_is_stored_as_a_digest_and_a_retry_is_the_same_reply(world):
    alice, _, run_id = world
    email = await first_email(alice, run_id)
    inbound, raw = await mailgun_inbound(alice), raw_reply(email, "nils@example.org", "Message-ID: <n\x00ul@x>")
    answer = await alice.post(inbound, content=raw, headers=RFC822)  # PostgreSQL text refuses NUL
    assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text
    assert (await alice.post(inbound, content=raw, headers=RFC822)).json()["duplicates"] == 1


async def test_a_from_address_over_500_characters_is_stored_under_a_digest(world):
    alice, _, run_id = world
    email = await first_email(alice, run_id)
    raw = reply_to(email, "<long-from@x>", From="p" * 600 + "@saint-aldric.example")
    answer = await alice.post(await mailgun_inbound(alice), content=raw, headers=RFC822)
    assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text


async def test_two_message_ids_sharing_their_first_500_characters_are_two_replies(world):
    alice, _, run_id = world
    email = await first_email(alice, run_id)
    inbound, shared = await mailgun_inbound(alice), "<" + "m" * 600
    before = (await outcomes_of(alice, run_id, email["ref"])).get("replies", 0)
    await sent_to(alice, email["ref"], "sam1@example.org", "sam2@example.org")
    for suffix in ("1@x>", "2@x>"):  # (replies count distinct recipients: two senders)
        raw = reply_to(email, shared + suffix, From=f"sam{suffix[0]}@example.org")
        answer = await alice.post(inbound, content=raw, headers=RFC822)
        assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text
    assert (await outcomes_of(alice, run_id, email["ref"]))["replies"] == before + 2


async def test_multipart_nested_1000_deep_is_refused_at_once_naming_the_limit(world):
    alice, _, run_id = world
    email = await first_email(alice, run_id)
    head = "".join(f'Content-Type: multipart/mixed; boundary="b{i}"\r\n\r\n--b{i}\r\n' for i in range(1000))
    deep = f"From: deep@example.org\r\nIn-Reply-To: {email['message_id']}\r\n{head}\r\nx".encode()
    before = await outcomes_of(alice, run_id, email["ref"])
    answer = await alice.post(await mailgun_inbound(alice), content=deep, headers=RFC822)
    assert answer.status_code == 422 and "INBOUND_MAX_MIME_PARTS" in answer.text, answer.text
    assert await outcomes_of(alice, run_id, email["ref"]) == before  # nothing stored


async def test_a_reply_with_an_attachment_over_a_megabyte_is_read(world):
    alice, _, run_id = world
    email = await first_email(alice, run_id)
    source = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": "k" * 32})).json()
    message = EmailMessage()
    message.set_content("Signed copy attached.")
    message["From"], message["Message-ID"], message["In-Reply-To"] = "priya@saint-aldric.example", "<pdf@x>", email["message_id"]
    message.add_attachment(os.urandom(3_000_000), maintype="application", subtype="pdf", filename="signed.pdf")
    answer = await alice.post(source["inbound_url"], content=message.as_bytes(), headers=RFC822)
    assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text


async def test_postmark_inbound_json_is_a_reply_behind_the_sources_basic_auth(world):
    alice, _, run_id = world
    email = await first_email(alice, run_id)
    source = (await alice.post("/outcome-sources", json={"provider": "postmark"})).json()
    credentials = base64.b64encode(f"{source['basic_auth']['username']}:{source['basic_auth']['password']}".encode())
    payload = {  # the shape of Postmark's documented example
        "FromName": "Olga Ivanova", "MessageStream": "inbound", "From": "olga@saint-aldric.example",
        "FromFull": {"Email": "olga@saint-aldric.example", "Name": "Olga Ivanova", "MailboxHash": ""},
        "To": "sales@inbound.example.com", "ToFull": [{"Email": "sales@inbound.example.com", "Name": "", "MailboxHash": ""}],
        "Cc": "", "CcFull": [], "OriginalRecipient": "sales@inbound.example.com", "ReplyTo": "",
        "Subject": "Re: " + email["subject"], "MessageID": "22c74902-a0c1-4511-804f-341342852c90",
        "Date": "Fri, 20 Nov 2026 10:00:00 +0000", "MailboxHash": "", "TextBody": "Yes, Thursday works.",
        "HtmlBody": "<p>Yes, Thursday works.</p>", "StrippedTextReply": "Yes, Thursday works.", "Tag": "",
        "Headers": [{"Name": "X-Spam-Status", "Value": "No"}, {"Name": "Message-ID", "Value": "<pm-reply-1@mx.example>"},
                    {"Name": "In-Reply-To", "Value": email["message_id"]}],
        "Attachments": [],
    }
    before = (await outcomes_of(alice, run_id, email["ref"])).get("replies", 0)
    await sent_to(alice, email["ref"], "olga@saint-aldric.example")
    assert (await alice.post(source["inbound_url"], json=payload)).status_code == 401
    authorized = {"Authorization": f"Basic {credentials.decode()}"}
    answer = await alice.post(source["inbound_url"], json=payload, headers=authorized)
    assert answer.status_code == 200 and answer.json() == {"accepted": 1, "duplicates": 0, "unattributed": 0}, answer.text
    assert (await alice.post(source["inbound_url"], json=payload, headers=authorized)).json()["duplicates"] == 1
    assert (await outcomes_of(alice, run_id, email["ref"]))["replies"] == before + 1


async def test_mailgun_route_forwards_parsed_and_raw_mime_are_replies(world):
    alice, _, run_id = world
    email = await first_email(alice, run_id)
    source = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": "k" * 32})).json()
    before = (await outcomes_of(alice, run_id, email["ref"])).get("replies", 0)
    await sent_to(alice, email["ref"], "mia@saint-aldric.example", "max@saint-aldric.example")
    parsed = {  # the fields Mailgun's documentation lists for a forward() to a URL
        "recipient": "sales@mg.example.com", "sender": "mia@saint-aldric.example",
        "from": "Mia Chen <mia@saint-aldric.example>", "subject": "Re: " + email["subject"],
        "body-plain": "Count me in.\n\nOn Thu, Nov 19, 2026 Sales wrote:\n> Hi", "stripped-text": "Count me in.",
        "timestamp": "1763632800", "token": "t" * 50, "signature": "0" * 64,
        "message-headers": json.dumps([["Message-Id", "<mg-reply-1@mx.example>"], ["In-Reply-To", email["message_id"]],
                                       ["From", "Mia Chen <mia@saint-aldric.example>"]]),
    }
    answer = await alice.post(source["inbound_url"], content=urlencode(parsed),
                              headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text
    # raw MIME: Mailgun posts body-mime only to a URL ending in "mime"
    raw = reply_to(email, "<mg-reply-2@mx.example>", From="max@saint-aldric.example").decode()
    answer = await alice.post(source["inbound_url"] + "/mime", files={"recipient": (None, "sales@mg.example.com"),
                                                                      "body-mime": (None, raw)})
    assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text
    assert (await outcomes_of(alice, run_id, email["ref"]))["replies"] == before + 2
