"""Which requests for a run's events get a Server-Sent Events stream."""

import pytest

from app.events import stream


@pytest.mark.parametrize("accept, streams", [
    ("text/event-stream", True),
    ("text/event-stream, */*;q=0.1", True),
    ("TEXT/EVENT-STREAM;charset=utf-8", True),
    ("text/event-stream, application/json;q=0.5", True),
    (None, False), ("", False), ("*/*", False), ("application/json", False),
    ("application/json, text/event-stream", False),
    ("text/event-stream;q=0", False), ("text/event-stream;q=oops", False),
])
def test_content_negotiation(accept, streams):
    assert stream.wants_event_stream(accept) is streams
