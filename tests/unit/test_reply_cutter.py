"""The reply's own text: what each rule of the cutter cuts, and what it keeps."""

import pytest

from app.outcomes.replies import own_text

OUR_EMAIL = "> Hi Anna,\n> Would you like a demo of CoDreamer?\n> Bob"


@pytest.mark.parametrize("header", [
    "On Mon, Jan 6, 2025 at 10:00 AM Bob Smith <bob@mail.codreamer.test> wrote:",
    "Le lun. 6 janv. 2025 à 10:00, Bob Smith <bob@mail.codreamer.test> a écrit :",
    "Am Mo., 6. Jan. 2025 um 10:00 Uhr schrieb Bob Smith <bob@mail.codreamer.test>:",
    "El lun, 6 ene 2025 a las 10:00, Bob Smith (<bob@mail.codreamer.test>) escribió:",
    "Em seg., 6 de jan. de 2025 às 10:00, Bob Smith <bob@mail.codreamer.test> escreveu:",
    "Il giorno lun 6 gen 2025 alle ore 10:00 Bob Smith <bob@mail.codreamer.test> ha scritto:",
    "Op ma 6 jan. 2025 om 10:00 schreef Bob Smith <bob@mail.codreamer.test>:",
    "W dniu 6.01.2025 o 10:00, Bob Smith pisze:",
    "пн, 6 янв. 2025 г. в 10:00, Bob Smith <bob@mail.codreamer.test>:",
    "06.01.2025, 10:00, \"Bob Smith\" <bob@mail.codreamer.test>:",
])
def test_an_attribution_and_the_quote_under_it_are_cut_in_each_language(header):
    assert own_text(f"Yes, let's talk.\n\n{header}\n{OUR_EMAIL}\n") == "Yes, let's talk."


def test_an_attribution_wrapped_over_two_lines_is_cut_whole():
    body = "Sounds good.\n\nOn Mon, Jan 6, 2025 at 10:00 AM Bob Smith from CoDreamer\n<bob@mail.codreamer.test> wrote:\n\n" \
           + OUR_EMAIL
    assert own_text(body) == "Sounds good."


@pytest.mark.parametrize("above", ["Thanks,", "Best,\nAnna", "Yes please,"])
def test_a_short_line_right_above_an_attribution_stays_the_replys(above):
    body = f"{above}\nOn Mon, Jan 6, 2025 at 10:00 AM Bob <bob@mail.codreamer.test> wrote:\n{OUR_EMAIL}"
    assert own_text(body) == above


@pytest.mark.parametrize("block", [
    "From: Bob Smith <bob@mail.codreamer.test>\nSent: Monday, January 6, 2025 10:00 AM\nTo: Anna\nSubject: A demo?",
    "De : Bob Smith <bob@mail.codreamer.test>\nEnvoyé : lundi 6 janvier 2025 10:00\nÀ : Anna\nObjet : Une démo ?",
    "Od: Bob Smith <bob@mail.codreamer.test>\nWysłano: poniedziałek, 6 stycznia 2025 10:00\nDo: Anna\nTemat: Demo?",
    "От: Bob Smith <bob@mail.codreamer.test>\nОтправлено: 6 января 2025 г. 10:00\nКому: Anna",
    "-----Original Message-----\nFrom: Bob\nHi Anna",
    "-------- Mensagem original --------\nDe: Bob",
])
def test_an_unquoted_history_under_a_header_block_is_cut_from_the_block_on(block):
    assert own_text(f"Not interested, thanks.\n\n________________________________\n{block}\n\nHi Anna, a demo?") == \
        "Not interested, thanks."


def test_a_reply_written_under_and_between_quotes_is_kept():
    body = "On Mon, Jan 6, 2025 at 10:00 AM Bob <bob@x.test> wrote:\n> Would you like a demo?\nYes, Tuesday.\n> Bob\nThanks"
    assert own_text(body) == "Yes, Tuesday.\nThanks"


@pytest.mark.parametrize("signature", ["Sent from my iPhone", "Von meinem iPhone gesendet", "Enviado desde mi Android",
                                       "Get Outlook for iOS<https://aka.ms/o0ukef>", "Inviato da iPhone",
                                       "Wysłane z iPhone'a", "Envoyé de mon iPad"])
def test_a_mobile_signature_and_what_follows_it_are_cut(signature):
    assert own_text(f"Let's talk Tuesday.\n\n{signature}\n\nHi Anna, would you like a demo?") == "Let's talk Tuesday."


def test_a_sentence_that_starts_like_a_signature_is_kept():
    assert own_text("Sent from my desk, which is easier than my phone.") == \
        "Sent from my desk, which is easier than my phone."


def test_a_dash_signature_and_a_list_footer_are_cut():
    assert own_text("Count me in.\n\n-- \nAnna Example\nHead of Ops") == "Count me in."
    footer = "--\nYou received this message because you are subscribed to the Google Groups \"ops\" group.\n" \
             "To unsubscribe from this group, send an email to ops+unsubscribe@googlegroups.com."
    assert own_text(f"Count me in.\n\n{footer}") == "Count me in."


def test_an_html_reply_keeps_its_text_and_drops_the_blockquote():
    html = ("<div>Yes, <b>Tuesday</b> works.</div><div class=gmail_quote>On Mon, Jan 6, 2025 at 10:00 AM Bob "
            "&lt;bob@x.test&gt; wrote:<blockquote>Would you like a demo?</blockquote></div>")
    assert own_text(html, html=True) == "Yes, Tuesday works."


def test_a_long_line_is_never_taken_for_a_header():
    long_line = "On " + "and on " * 60 + "she wrote:"
    assert own_text(f"Thanks!\n{long_line}\nMore.") == f"Thanks!\n{long_line}\nMore."
