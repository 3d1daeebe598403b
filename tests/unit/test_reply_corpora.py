"""The reply's own text over public reply corpora (tests/corpora/replies): the share kept exactly as their tests
expect stays at or above the target, in every source; a regression in the cutter fails here."""

from bench.replies import QUOTED_HISTORY_TARGET, corpus_replies, quoted_history


def test_the_corpora_are_what_the_target_is_measured_on():
    replies = corpus_replies()
    assert len(replies) >= 60
    assert {"en", "es", "fr", "de", "pt", "it", "nl", "pl", "ru"} <= {reply.language for reply in replies}
    assert sum(reply.format == "html" for reply in replies) >= 9
    assert len({reply.source for reply in replies}) >= 3


def test_the_kept_text_equals_the_expected_text_in_at_least_the_target_share():
    tallies = quoted_history()["tallies"]
    for key, tally in tallies.items():
        if key == "all" or key.startswith("source:"):
            assert tally["kept"] / tally["total"] >= QUOTED_HISTORY_TARGET, (key, tally, quoted_history()["failed"])
