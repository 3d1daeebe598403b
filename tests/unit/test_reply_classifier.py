"""The offline classifier: its floor on the held-out labelled replies, public delivery reports never read as a
person's reply, and what each rule decides."""

from datetime import UTC, date, datetime
from email.message import EmailMessage

import pytest

from app.outcomes.inbound import parse_reply
from app.outcomes.replies import Classification, DecidedBy, ReplyCategory, classify_reply
from bench.replies import MACHINE, MACRO_F1_TARGET, labelled, public_machine_messages, scores

FRIDAY = datetime(2026, 11, 20, 9, tzinfo=UTC)
HUMAN = set(ReplyCategory) - MACHINE - {ReplyCategory.unknown}


def test_macro_f1_on_the_held_out_replies_stays_above_the_target():
    held_out = labelled("heldout")
    assert len(held_out) + len(labelled("dev")) >= 200
    assert len({reply.language for reply in held_out if reply.category != ReplyCategory.unknown}) >= 5
    result = scores(held_out)
    assert {category.value for category in ReplyCategory} == set(result["per_category"])
    assert result["macro_f1"] >= MACRO_F1_TARGET, result["per_category"]


def test_no_public_delivery_report_or_auto_reply_is_read_as_a_persons_reply():
    messages = public_machine_messages()
    assert len(messages) >= 150
    read = {name: classify_reply(text, headers, FRIDAY) for name, headers, text in messages}
    assert not {name: result.category for name, result in read.items() if result.category not in MACHINE}
    assert all(result.category == ReplyCategory.bounce for name, result in read.items() if not name.startswith("rfc3834"))


def test_an_exim_bounce_marked_auto_replied_is_a_bounce_not_an_auto_reply():
    headers = {"From": "Mail Delivery System <Mailer-Daemon@mx.example.net>", "Auto-Submitted": "auto-replied",
               "Subject": "Mail delivery failed: returning message to sender"}
    result = classify_reply("A message that you sent could not be delivered to one or more of its recipients.",
                            headers, FRIDAY)
    assert (result.category, result.decided_by) == (ReplyCategory.bounce, DecidedBy.rules)
    assert "mailer-daemon" in result.reason


@pytest.mark.parametrize("subject", ["Unzustellbar: Angebot", "Non remis : Offre", "No se puede entregar: Oferta",
                                     "Onbestelbaar: offerte", "Niedostarczalne: oferta", "Impossibile recapitare"])
def test_bounce_subjects_in_several_languages(subject):
    assert classify_reply("", {"Subject": subject}, FRIDAY).category == ReplyCategory.bounce


def test_auto_submitted_alone_is_an_auto_reply_and_with_an_away_notice_an_out_of_office():
    assert classify_reply("Your request was logged.", {"Auto-Submitted": "auto-replied"}, FRIDAY).category == \
        ReplyCategory.auto_reply
    away = classify_reply("I am out of the office until December 1.", {"Auto-Submitted": "auto-replied"}, FRIDAY)
    assert (away.category, away.returns_on) == (ReplyCategory.out_of_office, date(2026, 12, 1))
    assert away.confidence > classify_reply("I am out of the office until December 1.", {}, FRIDAY).confidence


@pytest.mark.parametrize("text, returns_on", [
    ("I'm on vacation and will be back on Monday, November 30th.", date(2026, 11, 30)),
    ("Out of office until 12/07.", date(2026, 12, 7)),
    ("Estoy fuera de la oficina hasta el 7 de diciembre.", date(2026, 12, 7)),
    ("Je suis en congé, de retour le 3 janvier.", date(2027, 1, 3)),
    ("Ich bin im Urlaub und ab dem 2.12.2026 wieder im Büro.", date(2026, 12, 2)),
    ("Estou de férias e retorno no dia 4 de dezembro.", date(2026, 12, 4)),
    ("Sono in ferie, rientrerò il 9 dicembre.", date(2026, 12, 9)),
    ("Ik ben met vakantie tot en met 2 december, vanaf 3 december weer bereikbaar.", date(2026, 12, 3)),
    ("Jestem na urlopie do 30 listopada.", date(2026, 11, 30)),
    ("Out of office, back Tuesday.", date(2026, 11, 24)),
    ("I am out of the office with limited access to email.", None),
])
def test_an_out_of_office_reads_its_return_date_in_each_language(text, returns_on):
    result = classify_reply(text, {"Subject": "Automatic reply"}, FRIDAY)
    assert (result.category, result.returns_on) == (ReplyCategory.out_of_office, returns_on)


@pytest.mark.parametrize("text, category", [
    ("Not interested. Please remove me from your list.", ReplyCategory.unsubscribe),
    ("I'm not the right person, please talk to jane@acme.com.", ReplyCategory.referral),
    ("I'm not the right person.", ReplyCategory.wrong_person),
    ("Interesting, but not a priority for us this year.", ReplyCategory.not_interested),
    ("Interesting! Can we set up a call on Tuesday?", ReplyCategory.meeting),
    ("Interesting, can you send more details?", ReplyCategory.interested),
    ("How much does it cost for 10 users?", ReplyCategory.question),
])
def test_a_persons_reply_goes_to_the_first_category_that_matches_in_order(text, category):
    result = classify_reply(text, {}, FRIDAY)
    assert result.category == category and 0 < result.confidence < 1 and result.reason.startswith("phrase")


@pytest.mark.parametrize("text", ["ご連絡ありがとうございます。検討させていただきます。", "Спасибо, я посмотрю.",
                                  "Kiitos viestistä, palaan asiaan ensi viikolla.", "", "👍"])
def test_a_language_it_does_not_read_or_no_signal_is_unknown_with_confidence_zero(text):
    assert classify_reply(text, {}, FRIDAY) == Classification(ReplyCategory.unknown, 0.0, DecidedBy.rules,
                                                              classify_reply(text, {}, FRIDAY).reason, None)


def test_header_names_are_read_whatever_their_case():
    assert classify_reply("Thanks", {"auto-submitted": "auto-replied"}, FRIDAY).category == ReplyCategory.auto_reply
    assert classify_reply("Thanks", {"AUTO-SUBMITTED": "no"}, FRIDAY).category != ReplyCategory.auto_reply


def _reply(body: str, **headers: str) -> bytes:
    message = EmailMessage()
    message["From"], message["To"] = "Anna <anna@example.com>", "Bob <bob@in.codreamer.test>"
    message["Subject"], message["Message-ID"] = headers.pop("Subject", "Re: A demo?"), "<r-1@example.com>"
    message["In-Reply-To"] = "<eml_k3j4h5g6f7d8s9a0q1w2@in.codreamer.test>"
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(body)
    return message.as_bytes()


def test_an_inbound_reply_is_classified_from_its_own_text_in_the_parser():
    body = "Please take me off your list.\n\nOn Mon, Jan 6, 2025 at 10:00 AM Bob <bob@in.codreamer.test> wrote:\n" \
           "> Let's set up a call on Tuesday?\n"
    reply = parse_reply(_reply(body), domain="in.codreamer.test")
    assert reply.text == "Please take me off your list."
    assert reply.classification.category == ReplyCategory.unsubscribe  # the quoted "set up a call" is not read


def test_an_inbound_delivery_report_about_one_of_our_emails_is_a_bounce():
    report = EmailMessage()
    report["From"], report["To"] = "MAILER-DAEMON@mx.example.com", "bob@in.codreamer.test"
    report["Subject"], report["Message-ID"] = "Undelivered Mail Returned to Sender", "<dsn-1@mx.example.com>"
    report.set_content("This is the mail system at host mx.example.com.\n\nMessage-ID: "
                       "<eml_k3j4h5g6f7d8s9a0q1w2@in.codreamer.test>\n")
    report.replace_header("Content-Type", 'multipart/report; report-type=delivery-status; boundary="b"')
    reply = parse_reply(report.as_bytes(), domain="in.codreamer.test")
    assert (reply.ref, reply.auto, reply.classification.category) == \
        ("eml_k3j4h5g6f7d8s9a0q1w2", True, ReplyCategory.bounce)
