"""Providers' webhook requests, signed with each provider's real scheme under keys made here, verified and
mapped to outcome events (app/outcomes/providers/). Payloads are shaped as each provider documents them."""

import base64
import hashlib
import hmac
import json
import secrets
import time
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from standardwebhooks.webhooks import Webhook
from starlette.datastructures import Headers

from app.outcomes.providers.base import TOLERANCE_S, BadSignature
from app.outcomes.providers.mailgun import parse_mailgun, verify_mailgun
from app.outcomes.providers.postmark import check_basic_auth, parse_postmark
from app.outcomes.providers.resend import parse_resend, verify_resend
from app.outcomes.providers.sendgrid import load_sendgrid_key, parse_sendgrid, verify_sendgrid
from app.outcomes.schemas import OutcomeType

REF = "eml_k3j4h5g6f7d8s9a0q1w2"
SIX_MINUTES = 6 * 60


# --- SendGrid ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sendgrid_keys():
    """A P-256 key pair; the public half as SendGrid shows it (base64 DER SubjectPublicKeyInfo)."""
    private = ec.generate_private_key(ec.SECP256R1())
    der = private.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, base64.b64encode(der).decode()


def sendgrid_signed(private, body: bytes, timestamp: int) -> dict[str, str]:
    signature = private.sign(str(timestamp).encode() + body, ec.ECDSA(hashes.SHA256()))
    return {"X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
            "X-Twilio-Email-Event-Webhook-Timestamp": str(timestamp)}


def sendgrid_events() -> list[dict]:
    common = {"email": "anna@example.com", "timestamp": 1513299569, "smtp-id": "<14c5d75ce93.dfd.64b469@ismtpd-555>",
              "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0", "category": ["outreach"],
              "codreamer_ref": REF}
    return [
        {**common, "event": "processed", "sg_event_id": "cHJvY2Vzc2VkLTE"},
        {**common, "event": "deferred", "sg_event_id": "ZGVmZXJyZWQtMg", "response": "400 try again later",
         "attempt": "5"},
        {**common, "event": "delivered", "sg_event_id": "ZGVsaXZlcmVkLTM", "ip": "168.1.1.1", "response": "250 OK"},
        {**common, "event": "open", "sg_event_id": "b3Blbi00", "useragent": "Mozilla/5.0", "ip": "255.255.255.255",
         "sg_machine_open": False},
        {**common, "event": "open", "sg_event_id": "b3Blbi01", "useragent": "Mozilla/5.0", "ip": "17.58.0.1",
         "sg_machine_open": True},
        {**common, "event": "click", "sg_event_id": "Y2xpY2stNg", "useragent": "Mozilla/5.0", "ip": "255.255.255.255",
         "url": "https://example.com/demo", "url_offset": {"index": 0, "type": "html"}},
        {**common, "event": "bounce", "sg_event_id": "Ym91bmNlLTc", "type": "bounce", "status": "5.1.1",
         "reason": "550 5.1.1 The email account that you tried to reach does not exist.",
         "bounce_classification": "Invalid Address"},
        {**common, "event": "bounce", "sg_event_id": "YmxvY2tlZC04", "type": "blocked", "status": "4.0.0",
         "reason": "421 try again later", "bounce_classification": "Reputation"},
        {**common, "event": "dropped", "sg_event_id": "ZHJvcHBlZC05", "reason": "Bounced Address", "status": "5.0.0"},
        {**common, "event": "spamreport", "sg_event_id": "c3BhbXJlcG9ydC0xMA"},
        {**common, "event": "unsubscribe", "sg_event_id": "dW5zdWJzY3JpYmUtMTE"},
        {**common, "event": "group_unsubscribe", "sg_event_id": "Z3JvdXBfdW5zdWItMTI", "asm_group_id": 10},
        {**common, "event": "group_resubscribe", "sg_event_id": "Z3JvdXBfcmVzdWItMTM", "asm_group_id": 10},
    ]


def test_sendgrid_signed_request_is_accepted_and_mapped(sendgrid_keys):
    private, public = sendgrid_keys
    body = json.dumps(sendgrid_events()).encode()
    now = time.time()
    verify_sendgrid(Headers(sendgrid_signed(private, body, int(now))), body, public_key=public, now=now)
    # a plain dict with any capitalisation works as well, and so does a key loaded beforehand
    lower = {k.lower(): v for k, v in sendgrid_signed(private, body, int(now)).items()}
    verify_sendgrid(lower, body, public_key=load_sendgrid_key(public), now=now)

    events = parse_sendgrid(body)
    assert [(e.type, e.id, e.machine) for e in events] == [
        (OutcomeType.DELIVERED, "ZGVsaXZlcmVkLTM", False),
        (OutcomeType.OPENED, "b3Blbi00", False),
        (OutcomeType.OPENED, "b3Blbi01", True),  # sg_machine_open: Apple Mail Privacy Protection
        (OutcomeType.CLICKED, "Y2xpY2stNg", False),
        (OutcomeType.BOUNCED, "Ym91bmNlLTc", False),  # the "blocked" bounce (temporary) is skipped
        (OutcomeType.BOUNCED, "ZHJvcHBlZC05", False),
        (OutcomeType.COMPLAINED, "c3BhbXJlcG9ydC0xMA", False),
        (OutcomeType.UNSUBSCRIBED, "dW5zdWJzY3JpYmUtMTE", False),
        (OutcomeType.UNSUBSCRIBED, "Z3JvdXBfdW5zdWItMTI", False),
    ]  # processed, deferred and group_resubscribe are skipped
    assert {e.ref for e in events} == {REF} and {e.recipient for e in events} == {"anna@example.com"}
    assert events[0].occurred_at == datetime(2017, 12, 15, 0, 59, 29, tzinfo=UTC)


def test_sendgrid_tampered_body_is_refused(sendgrid_keys):
    private, public = sendgrid_keys
    body = json.dumps(sendgrid_events()[2:3]).encode()
    now = time.time()
    headers = sendgrid_signed(private, body, int(now))
    with pytest.raises(BadSignature, match="does not match"):
        verify_sendgrid(headers, body.replace(b"delivered", b"spamreport"), public_key=public, now=now)
    # the timestamp is signed too: a fresh one on an old signature does not verify
    moved = {**headers, "X-Twilio-Email-Event-Webhook-Timestamp": str(int(now) + 1)}
    with pytest.raises(BadSignature, match="does not match"):
        verify_sendgrid(moved, body, public_key=public, now=now)
    other = base64.b64encode(ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).decode()
    with pytest.raises(BadSignature, match="does not match"):
        verify_sendgrid(headers, body, public_key=other, now=now)
    with pytest.raises(BadSignature, match="not base64"):
        verify_sendgrid({**headers, "X-Twilio-Email-Event-Webhook-Signature": "not base64!"}, body,
                        public_key=public, now=now)


def test_sendgrid_missing_headers_are_refused(sendgrid_keys):
    private, public = sendgrid_keys
    body, now = b"[]", time.time()
    headers = sendgrid_signed(private, body, int(now))
    for name in headers:
        with pytest.raises(BadSignature, match=f"missing header {name}"):
            verify_sendgrid({k: v for k, v in headers.items() if k != name}, body, public_key=public, now=now)


def test_sendgrid_timestamp_outside_five_minutes_is_refused(sendgrid_keys):
    private, public = sendgrid_keys
    body, now = b"[]", time.time()
    with pytest.raises(BadSignature, match="too old"):
        verify_sendgrid(sendgrid_signed(private, body, int(now) - SIX_MINUTES), body, public_key=public, now=now)
    with pytest.raises(BadSignature, match="future"):
        verify_sendgrid(sendgrid_signed(private, body, int(now) + SIX_MINUTES), body, public_key=public, now=now)
    verify_sendgrid(sendgrid_signed(private, body, int(now) - TOLERANCE_S + 5), body, public_key=public, now=now)


def test_sendgrid_key_that_is_not_p256_is_a_configuration_error():
    with pytest.raises(ValueError, match="not a base64 DER"):
        load_sendgrid_key("not a key")
    p384 = ec.generate_private_key(ec.SECP384R1()).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    with pytest.raises(ValueError, match="P-256"):
        load_sendgrid_key(base64.b64encode(p384).decode())


def test_sendgrid_event_without_ref_is_unattributed():
    event = {k: v for k, v in sendgrid_events()[2].items() if k != "codreamer_ref"}
    assert parse_sendgrid(json.dumps([event]).encode())[0].ref is None
    legacy = {**event, "unique_args": {"codreamer_ref": REF}}
    assert parse_sendgrid(json.dumps([legacy]).encode())[0].ref == REF


def test_sendgrid_malformed_bodies_are_value_errors():
    delivered = sendgrid_events()[2]
    for body, message in [
        (b"{not json", "not JSON"),
        (b'{"event": "delivered"}', "not a JSON array"),
        (b"[1]", "event 0 is not a JSON object"),
        (json.dumps([{k: v for k, v in delivered.items() if k != "sg_event_id"}]).encode(), "missing 'sg_event_id'"),
        (json.dumps([{k: v for k, v in delivered.items() if k != "email"}]).encode(), "missing 'email'"),
        (json.dumps([{**delivered, "timestamp": "yesterday"}]).encode(), "not a Unix time"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_sendgrid(body)


# --- Mailgun ----------------------------------------------------------------------------------------------------


def mailgun_body(signing_key: str, event_data: dict, *, timestamp: int | None = None,
                 token: str | None = None) -> bytes:
    timestamp = int(time.time()) if timestamp is None else timestamp
    token = token or secrets.token_hex(25)  # 50 characters, as Mailgun's
    signature = hmac.new(signing_key.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    return json.dumps({"signature": {"timestamp": str(timestamp), "token": token, "signature": signature},
                       "event-data": event_data}).encode()


def mailgun_event(event: str, **extra) -> dict:
    return {
        "event": event, "id": "CPgfbmQMTCKtHW6uIWtuVe", "timestamp": 1521472262.908181, "log-level": "info",
        "recipient": "anna@example.com", "recipient-domain": "example.com", "tags": ["outreach"],
        "user-variables": {"codreamer_ref": REF},
        "message": {"headers": {"to": "Anna <anna@example.com>", "message-id": f"{REF}@mail.codreamer.test",
                                "from": "Bob <bob@mail.codreamer.test>", "subject": "A demo?"}},
        "flags": {"is-authenticated": True, "is-test-mode": False},
        **extra,
    }


def client_info(bot: str) -> dict:
    return {"client-info": {"client-name": "unknown", "client-type": "unknown", "user-agent": "Mozilla/5.0",
                            "device-type": "unknown", "client-os": "unknown", "bot": bot},
            "geolocation": {"region": "Unknown", "country": "US", "city": "Unknown"}, "ip": "17.58.0.1"}


def test_mailgun_signed_request_is_accepted_and_mapped():
    key = secrets.token_hex(16)
    body = mailgun_body(key, mailgun_event("delivered", **{
        "delivery-status": {"tls": True, "code": 250, "message": "OK", "attempt-no": 1, "description": ""}}),
        token="651869375b9df3c98fc15c4889b102119add1235c38fc92824")
    token = verify_mailgun(body, signing_key=key, now=time.time())
    assert token == "651869375b9df3c98fc15c4889b102119add1235c38fc92824"
    [event] = parse_mailgun(body)
    assert (event.type, event.id, event.ref, event.recipient, event.machine) == (
        OutcomeType.DELIVERED, "CPgfbmQMTCKtHW6uIWtuVe", REF, "anna@example.com", False)
    assert event.occurred_at == datetime.fromtimestamp(1521472262.908181, tz=UTC)

    expected = {
        "opened": OutcomeType.OPENED, "clicked": OutcomeType.CLICKED, "complained": OutcomeType.COMPLAINED,
        "unsubscribed": OutcomeType.UNSUBSCRIBED,
    }
    for kind, outcome in expected.items():
        [event] = parse_mailgun(mailgun_body(key, mailgun_event(kind, **client_info(""))))
        assert event.type == outcome and event.machine is False


def test_mailgun_bot_open_and_click_are_machine():
    key = secrets.token_hex(16)
    for bot in ("apple", "gmail", "generic"):
        for kind in ("opened", "clicked"):
            [event] = parse_mailgun(mailgun_body(key, mailgun_event(kind, **client_info(bot))))
            assert event.machine is True, (bot, kind)


def test_mailgun_failures_count_only_when_permanent_and_other_kinds_are_skipped():
    key = secrets.token_hex(16)
    permanent = mailgun_event("failed", severity="permanent", reason="bounce", **{
        "delivery-status": {"code": 550, "message": "5.1.1 The email account that you tried to reach does not exist",
                            "attempt-no": 1, "description": ""}})
    temporary = mailgun_event("failed", severity="temporary", reason="generic", **{
        "delivery-status": {"code": 452, "message": "4.2.2 mailbox full", "attempt-no": 1, "retry-seconds": 600}})
    [bounce] = parse_mailgun(mailgun_body(key, permanent))
    assert bounce.type == OutcomeType.BOUNCED
    assert parse_mailgun(mailgun_body(key, temporary)) == []
    assert parse_mailgun(mailgun_body(key, mailgun_event("accepted", method="HTTP"))) == []


def test_mailgun_tampered_signature_missing_block_and_old_timestamp_are_refused():
    key = secrets.token_hex(16)
    body = mailgun_body(key, mailgun_event("delivered"))
    signed = json.loads(body)
    # Mailgun signs timestamp + token only: changing either breaks the signature
    for field, value in (("token", secrets.token_hex(25)), ("timestamp", str(int(time.time()) + 1))):
        forged = {**signed, "signature": {**signed["signature"], field: value}}
        with pytest.raises(BadSignature, match="does not match"):
            verify_mailgun(json.dumps(forged).encode(), signing_key=key, now=time.time())
    with pytest.raises(BadSignature, match="does not match"):
        verify_mailgun(body, signing_key="another key", now=time.time())
    with pytest.raises(BadSignature, match="no signature block"):
        verify_mailgun(json.dumps({"event-data": signed["event-data"]}).encode(), signing_key=key, now=time.time())
    for field in ("timestamp", "token", "signature"):
        partial = {**signed, "signature": {k: v for k, v in signed["signature"].items() if k != field}}
        with pytest.raises(BadSignature, match=f"missing signature.{field}"):
            verify_mailgun(json.dumps(partial).encode(), signing_key=key, now=time.time())
    with pytest.raises(BadSignature, match="not a JSON object"):
        verify_mailgun(b"token=x&signature=y", signing_key=key, now=time.time())
    old = mailgun_body(key, mailgun_event("delivered"), timestamp=int(time.time()) - SIX_MINUTES)
    with pytest.raises(BadSignature, match="too old"):
        verify_mailgun(old, signing_key=key, now=time.time())


def test_mailgun_event_without_ref_is_unattributed_and_malformed_is_value_error():
    key = secrets.token_hex(16)
    for variables in ({}, []):  # Mailgun sends [] when the message had none
        [event] = parse_mailgun(mailgun_body(key, mailgun_event("delivered", **{"user-variables": variables})))
        assert event.ref is None
    with pytest.raises(ValueError, match="no 'event-data'"):
        parse_mailgun(b'{"signature": {}}')
    with pytest.raises(ValueError, match="missing 'recipient'"):
        parse_mailgun(mailgun_body(key, {k: v for k, v in mailgun_event("delivered").items() if k != "recipient"}))
    with pytest.raises(ValueError, match="missing 'event'"):
        parse_mailgun(mailgun_body(key, {"id": "x"}))


# --- Resend -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def resend_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def resend_signed(secret: str, body: bytes, *, msg_id: str = "msg_2W2D3qXLS5fOaPja1GDg7rF2CwB",
                  timestamp: float | None = None) -> dict[str, str]:
    moment = datetime.fromtimestamp(time.time() if timestamp is None else timestamp, tz=UTC)
    signature = Webhook(secret).sign(msg_id=msg_id, timestamp=moment, data=body.decode())
    return {"svix-id": msg_id, "svix-timestamp": str(int(moment.timestamp())), "svix-signature": signature}


def resend_event(kind: str, tags=None, **data) -> bytes:
    return json.dumps({"type": kind, "created_at": "2024-11-22T23:41:12.126Z", "data": {
        "broadcast_id": "8b146471-e88e-4322-86af-016cd36fd216", "created_at": "2024-11-22T23:41:11.894719+00:00",
        "email_id": "56761188-7520-42d8-8898-ff6fc54ce618", "from": "Bob <bob@mail.codreamer.test>",
        "to": ["Anna <anna@example.com>"], "subject": "A demo?",
        "tags": {"codreamer_ref": REF, "category": "outreach"} if tags is None else tags, **data}}).encode()


def test_resend_signed_request_is_accepted_and_mapped(resend_secret):
    body = resend_event("email.clicked", click={
        "ipAddress": "122.115.53.11", "link": "https://example.com/demo", "timestamp": "2024-11-24T05:00:57.163Z",
        "userAgent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7)"})
    headers = resend_signed(resend_secret, body)
    verify_resend(Headers(headers), body, secret=resend_secret, now=time.time())
    [event] = parse_resend(Headers(headers), body)
    assert (event.type, event.id, event.ref, event.recipient, event.machine) == (
        OutcomeType.CLICKED, "msg_2W2D3qXLS5fOaPja1GDg7rF2CwB", REF, "anna@example.com", False)
    assert event.occurred_at == datetime(2024, 11, 22, 23, 41, 12, 126000, tzinfo=UTC)

    expected = {"email.delivered": OutcomeType.DELIVERED, "email.opened": OutcomeType.OPENED,
                "email.complained": OutcomeType.COMPLAINED}
    for kind, outcome in expected.items():
        assert [e.type for e in parse_resend(headers, resend_event(kind))] == [outcome]
    bounced = resend_event("email.bounced", bounce={
        "message": "The recipient's email provider sent a hard bounce message.", "subType": "General",
        "type": "Permanent"})
    assert [e.type for e in parse_resend(headers, bounced)] == [OutcomeType.BOUNCED]


def test_resend_webhook_header_names_work_too(resend_secret):
    body = resend_event("email.delivered")
    svix = resend_signed(resend_secret, body)
    standard = {"webhook-" + name.removeprefix("svix-"): value for name, value in svix.items()}
    verify_resend(standard, body, secret=resend_secret, now=time.time())
    assert parse_resend(standard, body)[0].id == svix["svix-id"]


def test_resend_skipped_kinds_and_tags_as_a_list(resend_secret):
    for kind in ("email.sent", "email.delivery_delayed", "contact.created"):
        assert parse_resend({"svix-id": "msg_1"}, resend_event(kind)) == []
    as_list = resend_event("email.opened", tags=[{"name": "category", "value": "outreach"},
                                                 {"name": "codreamer_ref", "value": REF}])
    assert parse_resend({"svix-id": "msg_1"}, as_list)[0].ref == REF
    assert parse_resend({"svix-id": "msg_1"}, resend_event("email.opened", tags={}))[0].ref is None
    assert parse_resend({"svix-id": "msg_1"}, resend_event("email.opened", tags=[]))[0].ref is None


def test_resend_tampered_missing_and_old_are_refused(resend_secret):
    body = resend_event("email.delivered")
    headers = resend_signed(resend_secret, body)
    with pytest.raises(BadSignature, match="does not verify"):
        verify_resend(headers, body.replace(b"delivered", b"complained"), secret=resend_secret, now=time.time())
    other = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    with pytest.raises(BadSignature, match="does not verify"):
        verify_resend(headers, body, secret=other, now=time.time())
    for name in headers:
        with pytest.raises(BadSignature, match=f"missing header {name}"):
            verify_resend({k: v for k, v in headers.items() if k != name}, body, secret=resend_secret, now=time.time())
    with pytest.raises(BadSignature, match="malformed"):
        verify_resend({**headers, "svix-signature": "v1"}, body, secret=resend_secret, now=time.time())
    old = resend_signed(resend_secret, body, timestamp=time.time() - SIX_MINUTES)
    with pytest.raises(BadSignature, match="too old"):
        verify_resend(old, body, secret=resend_secret, now=time.time())


def test_resend_library_enforces_the_tolerance_on_its_own(resend_secret):
    """standardwebhooks checks the timestamp against the clock whatever `now` says: a request signed 6 minutes
    ago is refused even by a caller that passes the signing time as `now`."""
    body = resend_event("email.delivered")
    signed_at = time.time() - SIX_MINUTES
    with pytest.raises(BadSignature, match="too old"):
        verify_resend(resend_signed(resend_secret, body, timestamp=signed_at), body, secret=resend_secret,
                      now=signed_at)


def test_resend_malformed_bodies_are_value_errors():
    for body, message in [(b"[]", "not a JSON object"), (b'{"data": {}}', "no 'type'"),
                          (b'{"type": "email.opened"}', "missing 'data'")]:
        with pytest.raises(ValueError, match=message):
            parse_resend({"svix-id": "msg_1"}, body)
    with pytest.raises(ValueError, match="missing header svix-id"):
        parse_resend({}, resend_event("email.opened"))
    with pytest.raises(ValueError, match="missing data.to"):
        parse_resend({"svix-id": "msg_1"}, resend_event("email.opened", to=[]))


# --- Postmark ---------------------------------------------------------------------------------------------------


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def test_postmark_basic_auth():
    check_basic_auth(basic("codreamer", "s3cret:with:colons"), "codreamer", "s3cret:with:colons")
    check_basic_auth("basic " + basic("codreamer", "pw").split()[1], "codreamer", "pw")
    for header, message in [
        (None, "missing header Authorization"), ("", "missing header Authorization"),
        ("Bearer abc", "not HTTP basic"), ("Basic %%%", "not base64"),
        (basic("codreamer", "wrong"), "bad credentials"), (basic("someone", "pw"), "bad credentials"),
        ("Basic " + base64.b64encode(b"codreamerpw").decode(), "bad credentials"),
    ]:
        with pytest.raises(BadSignature, match=message):
            check_basic_auth(header, "codreamer", "pw")


POSTMARK_RECORDS = {
    "Delivery": {"RecordType": "Delivery", "ServerID": 23, "MessageStream": "outbound",
                 "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483", "Recipient": "anna@example.com",
                 "Tag": "outreach", "DeliveredAt": "2019-11-05T16:33:54.9070259Z",
                 "Details": "Test delivery webhook details", "Metadata": {"codreamer_ref": REF}},
    "Open": {"RecordType": "Open", "MessageStream": "outbound", "FirstOpen": True,
             "Client": {"Name": "Chrome 35.0.1916.153", "Company": "Google", "Family": "Chrome"},
             "OS": {"Name": "OS X 10.7 Lion", "Company": "Apple Computer, Inc.", "Family": "OS X 10"},
             "Platform": "WebMail", "UserAgent": "Mozilla/5.0", "ReadSeconds": 5, "Geo": {},
             "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483", "ReceivedAt": "2019-11-05T16:33:54.9070259Z",
             "Tag": "outreach", "Recipient": "anna@example.com", "Metadata": {"codreamer_ref": REF}},
    "Click": {"RecordType": "Click", "MessageStream": "outbound", "ClickLocation": "HTML",
              "Client": {"Name": "Chrome 35.0.1916.153", "Company": "Google", "Family": "Chrome"},
              "OS": {"Name": "OS X 10.7 Lion", "Company": "Apple Computer, Inc.", "Family": "OS X 10"},
              "Platform": "Desktop", "UserAgent": "Mozilla/5.0", "OriginalLink": "https://example.com/demo",
              "Geo": {}, "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
              "ReceivedAt": "2017-10-25T15:21:11.9065619Z", "Tag": "outreach", "Recipient": "anna@example.com",
              "Metadata": {"codreamer_ref": REF}},
    "Bounce": {"RecordType": "Bounce", "MessageStream": "outbound", "ID": 4323372036854775807, "Type": "HardBounce",
               "TypeCode": 1, "Name": "Hard bounce", "Tag": "outreach",
               "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483", "ServerID": 23,
               "Description": "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
               "Details": "Test bounce details", "Email": "anna@example.com", "From": "bob@mail.codreamer.test",
               "BouncedAt": "2019-11-05T16:33:54.9070259Z", "DumpAvailable": True, "Inactive": True,
               "CanActivate": True, "Subject": "A demo?", "Content": "", "Metadata": {"codreamer_ref": REF}},
    "SpamComplaint": {"RecordType": "SpamComplaint", "MessageStream": "outbound", "ID": 42, "Type": "SpamComplaint",
                      "TypeCode": 512, "Name": "Spam complaint", "Tag": "outreach",
                      "MessageID": "00000000-0000-0000-0000-000000000000", "ServerID": 1234, "Description": "",
                      "Details": "Test spam complaint details", "Email": "anna@example.com",
                      "From": "bob@mail.codreamer.test", "BouncedAt": "2019-11-05T16:33:54.9070259Z",
                      "DumpAvailable": True, "Inactive": True, "CanActivate": False, "Subject": "A demo?",
                      "Content": "", "Metadata": {"codreamer_ref": REF}},
    "SubscriptionChange": {"RecordType": "SubscriptionChange", "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
                           "ServerID": 23, "MessageStream": "outbound", "ChangedAt": "2020-02-01T10:53:34.416071Z",
                           "Recipient": "anna@example.com", "Origin": "Recipient", "SuppressSending": True,
                           "SuppressionReason": "ManualSuppression", "Tag": "outreach",
                           "Metadata": {"codreamer_ref": REF}},
}


def test_postmark_records_are_mapped():
    expected = {"Delivery": OutcomeType.DELIVERED, "Open": OutcomeType.OPENED, "Click": OutcomeType.CLICKED,
                "Bounce": OutcomeType.BOUNCED, "SpamComplaint": OutcomeType.COMPLAINED,
                "SubscriptionChange": OutcomeType.UNSUBSCRIBED}
    for kind, outcome in expected.items():
        [event] = parse_postmark(json.dumps(POSTMARK_RECORDS[kind]).encode())
        assert (event.type, event.ref, event.recipient, event.machine) == (outcome, REF, "anna@example.com", False)
    [delivered] = parse_postmark(json.dumps(POSTMARK_RECORDS["Delivery"]).encode())
    assert delivered.id == "Delivery:883953f4-6105-42a2-a16a-77a8eac79483:2019-11-05T16:33:54.9070259Z"
    assert delivered.occurred_at == datetime(2019, 11, 5, 16, 33, 54, 907025, tzinfo=UTC)
    [bounce] = parse_postmark(json.dumps(POSTMARK_RECORDS["Bounce"]).encode())
    assert bounce.id == ("Bounce:883953f4-6105-42a2-a16a-77a8eac79483:2019-11-05T16:33:54.9070259Z"
                         ":4323372036854775807")
    # the id is stable: the same record posted again (a retry) gives the same id
    assert parse_postmark(json.dumps(POSTMARK_RECORDS["Bounce"]).encode())[0].id == bounce.id


def test_postmark_skipped_records():
    soft = {**POSTMARK_RECORDS["Bounce"], "Type": "SoftBounce", "TypeCode": 4096, "Name": "Soft bounce"}
    resubscribed = {**POSTMARK_RECORDS["SubscriptionChange"], "SuppressSending": False, "SuppressionReason": None}
    hard_bounce_suppression = {**POSTMARK_RECORDS["SubscriptionChange"], "Origin": "Recipient",
                               "SuppressionReason": "HardBounce"}
    inbound = {"RecordType": "Inbound", "MessageID": "x", "From": "anna@example.com"}
    for record in (soft, resubscribed, hard_bounce_suppression, inbound):
        assert parse_postmark(json.dumps(record).encode()) == []


def test_postmark_without_ref_and_malformed():
    without = {k: v for k, v in POSTMARK_RECORDS["Open"].items() if k != "Metadata"}
    assert parse_postmark(json.dumps(without).encode())[0].ref is None
    assert parse_postmark(json.dumps({**without, "Metadata": {}}).encode())[0].ref is None
    for body, message in [
        (b"[]", "not a JSON object"), (b'{"MessageID": "x"}', "no 'RecordType'"),
        (json.dumps({k: v for k, v in POSTMARK_RECORDS["Delivery"].items() if k != "MessageID"}).encode(),
         "missing 'MessageID'"),
        (json.dumps({**POSTMARK_RECORDS["Delivery"], "DeliveredAt": "yesterday"}).encode(), "not ISO 8601"),
        (json.dumps({k: v for k, v in POSTMARK_RECORDS["Bounce"].items() if k != "Email"}).encode(),
         "missing 'Email'"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_postmark(body)
