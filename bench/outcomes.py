"""Outcomes ingestion: how fast provider events go in.

SendGrid-format batches of 1,000 events, signed, POSTed 4 at a time to a live `codreamer serve` on PostgreSQL; then
each batch 4 more times, concurrently, which must add nothing. (What the loop learns from outcomes is measured in the
simulated world: `bench/world.py`.)
"""

import asyncio
import base64
import json
import os
import time
from pathlib import Path

TARGET = "scn-healthcare-cto"  # the run whose emails the events name
CONCURRENT_POSTS = 4  # batches in flight at once, as a provider's webhook sender keeps a few connections


def measure_ingestion(workdir: Path, batches: int = 20, per_batch: int = 1000, replays: int = 4) -> dict:
    """Signed SendGrid batches into PostgreSQL through a live server; then the same batches replayed concurrently."""
    import httpx
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from tests.support import FreshPostgresDatabase, Server

    database = FreshPostgresDatabase()
    server = Server(workdir, {"DATABASE_URL": database.url, "EXECUTOR_ID": "ingest-bench"}).start(timeout=180)
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json={"iterations": 1, "rollouts_per_group": 2, "scenario_ids": [TARGET],
                                                      "feedback_source": "none"}).json()["run_id"]
            while client.get(f"/runs/{run_id}").json()["status"] not in ("succeeded", "failed"):
                time.sleep(0.5)
            detail = client.get(f"/runs/{run_id}/iterations/1").json()
            refs = [detail["email"]["ref"]] + [t["email"]["ref"] for t in detail["trajectories"] if t["email"]]
            private = ec.generate_private_key(ec.SECP256R1())
            public = base64.b64encode(private.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).decode()
            hook = client.post("/outcome-sources", json={"provider": "sendgrid", "verification_key": public}).json()["url"]

        kinds = ("delivered", "open", "click", "delivered", "open")

        def signed(n: int) -> tuple[bytes, dict]:
            records = [{"email": f"r{n}-{i}@example.org", "timestamp": 1763631000 + i, "event": kinds[i % len(kinds)],
                        "sg_event_id": f"bench-{n}-{i}", "codreamer_ref": refs[i % len(refs)]} for i in range(per_batch)]
            body = json.dumps(records).encode()
            stamp = str(int(time.time()))
            signature = private.sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
            return body, {"X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
                          "X-Twilio-Email-Event-Webhook-Timestamp": stamp, "Content-Type": "application/json"}

        async def post_all(requests) -> list[dict]:
            gate = asyncio.Semaphore(CONCURRENT_POSTS)

            async def post(http, body, headers):
                async with gate:
                    return await http.post(hook, content=body, headers=headers)

            async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
                answers = await asyncio.gather(*(post(http, body, headers) for body, headers in requests))
            assert all(a.status_code == 200 for a in answers), [a.text for a in answers if a.status_code != 200][:3]
            return [a.json() for a in answers]

        requests = [signed(n) for n in range(batches)]
        started = time.monotonic()
        first = asyncio.run(post_all(requests))
        seconds = time.monotonic() - started
        replayed = asyncio.run(post_all([r for r in requests for _ in range(replays)]))
        with server.client() as client:
            stored = sum(e["sends"] > 0 for e in client.get(f"/runs/{run_id}/outcomes").json()["data"])
        return {
            "events": batches * per_batch, "batch": per_batch, "seconds": round(seconds, 2),
            "events_per_s": round(batches * per_batch / seconds), "accepted": sum(a["accepted"] for a in first),
            "replayed": len(replayed) * per_batch, "replay_accepted": sum(a["accepted"] for a in replayed),
            "replay_duplicates": sum(a["duplicates"] for a in replayed), "emails_with_outcomes": stored,
        }
    finally:
        server.stop()
        database.drop()


def measure(workdir: Path) -> dict:
    load = os.getloadavg()[0]
    return {"ingestion": measure_ingestion(workdir), "load_average_before": round(load, 2)}
