"""Reading what a model meant when it answered in text."""

import json

from app.agent.email_text import email_from_text, tool_call_from_text
from app.agent.tools import TOOL_NAMES

BODY = ("Hi Dana,\n\nHospitals like Mercy lose hours every week to manual audit prep. Our Audit Trail Export cut that "
        "to minutes for three regional systems last year, with HIPAA logging built in.\n\nWould a 20-minute call next "
        "Tuesday work?\n\nBest,\nSam")
READ = {"product-audit-export": "Audit Trail Export", "case-mercy": "Mercy Health case study"}


def test_a_subject_line_and_a_body_are_an_email_citing_only_read_nodes_it_mentions():
    text = f"Here is the email:\n\n**Subject:** Audit prep in minutes, Dana\n\n{BODY}"
    email = email_from_text(text, READ)
    assert email is not None and email.subject == "Audit prep in minutes, Dana"
    assert email.body == BODY and email.citations == ["product-audit-export"]  # the case study is read, not used


def test_without_a_subject_line_the_first_short_line_is_the_subject():
    email = email_from_text(f"Cutting audit prep at Mercy\n{BODY}", {})
    assert email is not None and email.subject == "Cutting audit prep at Mercy" and email.citations == []
    assert email_from_text(f"{'word ' * 16}\n{BODY}", {}) is None  # a paragraph, not a subject


def test_an_echoed_prompt_a_json_block_or_a_sentence_is_no_email():
    assert email_from_text('<start_nodes>[{"id": "product-audit-export"}]</start_nodes>\n' + BODY, READ) is None
    assert email_from_text('{"subject": "x", "body": "y"}', READ) is None
    assert email_from_text("Subject: Hello\nI will now read the product node.", READ) is None
    assert email_from_text("", READ) is None


def test_a_tool_call_written_as_json_is_read_fenced_or_bare():
    arguments = {"node_id": "product-audit-export"}
    fenced = f'I will read it.\n```json\n{json.dumps({"name": "get_relevant_context", "arguments": arguments})}\n```'
    assert tool_call_from_text(fenced, TOOL_NAMES) == ("get_relevant_context", json.dumps(arguments))
    bare = json.dumps({"name": "get_connected_nodes", "parameters": arguments})
    assert tool_call_from_text(bare, TOOL_NAMES) == ("get_connected_nodes", json.dumps(arguments))
    assert tool_call_from_text(json.dumps({"name": "send_email", "arguments": {}}), TOOL_NAMES) is None
    assert tool_call_from_text("Let me think about the prospect.", TOOL_NAMES) is None
