"""A hostile reply costs `codreamer serve` one parser process for at most INBOUND_PARSE_TIMEOUT_S, never the event loop
(issue 37, finding 1: one reply of a few hundred KB on one line starting with "On" froze the API for minutes)."""

import threading
from email.message import EmailMessage

import httpx
import pytest

from tests.support import Server

pytestmark = pytest.mark.slow
KEYS = "alice:alice-key,bob:bob-key"
PARSE_TIMEOUT_S = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("inbound")
    server = Server(workdir, {"DATABASE_URL": f"sqlite:///{workdir}/data/codreamer.sqlite", "RUN_WORKER": "false",
                              "API_KEYS": KEYS, "INBOUND_PARSE_WORKERS": "1",
                              "INBOUND_PARSE_TIMEOUT_S": str(PARSE_TIMEOUT_S), "INBOUND_MAX_TEXT_CHARS": "200000"}).start()
    yield server
    server.stop()


def reply(body: str, subtype: str = "plain", message_id: str = "<hostile@example.org>") -> bytes:
    email = EmailMessage()
    email["From"], email["To"], email["Message-ID"] = "eve@example.org", "sales@example.com", message_id
    email["In-Reply-To"] = "<eml_aaaaaaaaaaaaaaaaaaaa@codreamer.invalid>"
    email.set_content(body, subtype=subtype)
    return email.as_bytes()


def prose(chars: int) -> str:
    words = "we would love to hear more about the pricing for next quarter and the team ".split(" ")
    return " ".join(words * (chars // 70 + 1))[:chars]


def test_other_tenants_reads_answer_while_hostile_replies_are_parsed(server):
    alice = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer alice-key"}, timeout=120)
    bob = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer bob-key"}, timeout=60)
    source = alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": "k" * 32}).json()
    hostile = {
        # the reply: ~300 KB of prose on one line that starts with "On" (the reply cutter's quadratic case)
        "on-line": reply("On " + prose(300_000)),
        # an HTML reply whose markup html.parser reads in quadratic time: it keeps the parser busy past its budget,
        # so that the reads below are answered while a hostile reply is still in flight whatever this machine's speed
        "html": reply("<p>" + "</" * 300_000, subtype="html", message_id="<hostile-html@example.org>"),
    }
    answers: dict[str, httpx.Response] = {}
    done = {name: threading.Event() for name in hostile}

    def post(name: str) -> None:
        try:
            answers[name] = alice.post(source["inbound_url"], content=hostile[name],
                                       headers={"Content-Type": "message/rfc822"})
        finally:
            done[name].set()

    threads = [threading.Thread(target=post, args=(name,)) for name in hostile]
    for thread in threads:
        thread.start()
    reads_in_flight = 0  # reads answered while the HTML reply was still unanswered
    while not done["html"].is_set():
        assert httpx.get(f"{server.url}/healthz", timeout=60).status_code == 200
        assert bob.get("/runs").status_code == 200  # another tenant's read
        reads_in_flight += not done["html"].is_set()
    for thread in threads:
        thread.join()
    assert reads_in_flight >= 10, reads_in_flight  # with the parsing on the event loop: none, or the one or two before it
    assert answers["on-line"].status_code == 200, answers["on-line"].text  # read (in well under a second), not lost
    assert answers["on-line"].json() == {"accepted": 0, "duplicates": 0, "unattributed": 1}
    assert answers["html"].status_code == 422, answers["html"].text  # stopped at its budget, refused, nothing stored
    assert f"within {PARSE_TIMEOUT_S} s (INBOUND_PARSE_TIMEOUT_S)" in answers["html"].text
    # the parser process that was stopped is replaced: the next reply is read
    after = alice.post(source["inbound_url"], content=reply("Yes, let's talk.", message_id="<after@example.org>"),
                       headers={"Content-Type": "message/rfc822"})
    assert after.status_code == 200 and after.json()["unattributed"] == 1, after.text
    assert "Traceback" not in server.log.read_text(errors="replace")


def test_an_inbound_message_over_max_inbound_bytes_is_refused_with_413_naming_the_setting(server):
    source = httpx.post(f"{server.url}/outcome-sources", json={"provider": "mailgun", "signing_key": "k" * 32},
                        headers={"Authorization": "Bearer alice-key"}).json()
    big = reply("Thanks!\n" + "x" * 200, message_id="<big@example.org>") + b"\n" + b"a" * (10 * 1_048_576)
    answer = httpx.post(f"{server.url}{source['inbound_url']}", content=big, headers={"Content-Type": "message/rfc822"},
                        timeout=60)
    assert answer.status_code == 413
    assert "inbound message exceeds 10485760 bytes (MAX_INBOUND_BYTES)" in answer.json()["detail"]
