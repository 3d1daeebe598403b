"""The Server-Sent Events generator in process, against the run's event log."""

import json

from app.events import stream
from app.events.schemas import Subject, SubjectKind
from app.events.service import events_page
from app.kit.settings import Settings
from app.knowledge_graph.service import demo_document
from app.lifecycle.local import local_service
from app.runs import service as runs
from app.runs.events import CATALOGUE, TERMINAL_EVENTS, EventList
from app.runs.schemas import LearnLoopRequest

SCENARIO = demo_document().scenarios[0].id


def run_subject(run_id: str) -> Subject:
    return Subject(SubjectKind.RUN, run_id, "public")


async def test_stream_in_process_matches_the_event_log(tmp_path):
    """The generator alone: every event once, in order, then it ends; a quiet run gets keep-alive comments."""
    async with local_service(tmp_path, Settings(_env_file=None)) as process:
        feed = stream.EventFeed(process.api.db, poll_interval=0.05)
        quiet = feed.follow(CATALOGUE, run_subject("run_unknown"), keepalive=0.05)
        assert (await anext(quiet)).comment == "ping"
        await quiet.aclose()

        request = LearnLoopRequest(iterations=2, rollouts_per_group=2, scenario_ids=[SCENARIO])
        created, _ = await runs.create_run(process.api, request)
        sent = [event async for event in feed.follow(CATALOGUE, run_subject(created.run_id))]
        # a step slower than the keep-alive interval (a loaded machine) puts pings between the events
        assert {e.comment for e in sent if e.raw_data is None} <= {"ping"}
        streamed = [e for e in sent if e.raw_data is not None]
        async with process.api.db.read() as session:
            logged, _ = await events_page(session, run_subject(created.run_id), after=0, limit=1000)
    listed = EventList.model_validate({"data": logged, "has_more": False}, from_attributes=True).model_dump(mode="json")["data"]
    assert [(e.id, e.event, json.loads(e.raw_data)) for e in streamed] == [(str(e["seq"]), e["type"], e["data"]) for e in listed]
    assert streamed[-1].event in TERMINAL_EVENTS
