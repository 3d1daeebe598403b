"""The dashboard at /ui in a real headless browser (Debian's chromium driven by Playwright), with API_KEYS set."""

import os
import shutil
import time
from pathlib import Path

import pytest

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra: make install")

from tests.standins import Receiver
from tests.support import Server, wait_for, wait_for_status

pytestmark = pytest.mark.slow
KEY = "dashboard-key"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# The README's screenshot is rewritten only on request: UPDATE_SCREENSHOT=1 make test
README_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    if not shutil.which(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} missing: .ci/run installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} missing (apt-get install -y chromium)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("dashboard")
    server = Server(workdir, {"DATABASE_URL": f"sqlite:///{workdir}/data/codreamer.sqlite", "API_KEYS": KEY,
                              "EXECUTOR_ID": "dashboard", "WEBHOOK_ALLOW_PRIVATE": "true"}, api_key=KEY).start()
    yield server
    server.stop()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    failed = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.on("pageerror", lambda error: failed.append(str(error)))
    yield page
    context.close()
    assert not [f for f in failed if "/events" not in f], f"failed requests or page errors: {failed}"  # streams are aborted on purpose


def test_start_a_run_and_watch_it_live(server, page, tmp_path):
    streams = []
    page.on("request", lambda r: r.url.endswith("/events") and streams.append(r.headers))
    page.goto(server.url + "/")  # redirects to /ui
    assert page.url.endswith("/ui")
    page.wait_for_selector("#key-form:not([hidden])")  # the API answered 401: the page asks for the key
    page.fill("#key-input", KEY)
    page.click("#key-form button[type=submit]")
    sync_api.expect(page.locator("#key-form")).to_be_hidden()
    page.wait_for_selector("#graph option[value=demo]", state="attached")
    page.wait_for_selector("#scenario option", state="attached")
    scenario = page.eval_on_selector("#scenario", "el => el.options[0].value")
    page.fill("#iterations", "6")
    assert page.input_value("#rollouts") == "4"
    page.click("#start-form button[type=submit]")

    page.wait_for_url("**/ui#/runs/*")
    run_id = page.url.rsplit("/", 1)[1]
    seen_points, seen_emails, deadline = set(), set(), time.monotonic() + 300  # a busy machine: the worker is niced
    while page.text_content("#status") != "succeeded" and time.monotonic() < deadline:  # the curve grows live
        seen_points.add(page.locator("svg.chart circle.point").count())
        seen_emails.update(page.locator("#email-subject, #email-iteration").all_text_contents())
        page.wait_for_timeout(50)
    sync_api.expect(page.locator("#status")).to_have_text("succeeded")
    sync_api.expect(page.locator("svg.chart circle.point")).to_have_count(6)
    assert {1, 2, 3, 4, 5} & seen_points, f"the curve did not grow live, point counts seen: {sorted(seen_points)}"
    assert len({text for text in seen_emails if text.startswith("Iteration")}) >= 2, f"the email did not update: {seen_emails}"
    assert "6 / 6" in page.text_content("#progress")
    assert streams and all(h["accept"] == "text/event-stream" and h["authorization"] == f"Bearer {KEY}" for h in streams)

    with server.client() as client:
        run = wait_for_status(client, run_id)
        iterations = client.get(f"/runs/{run_id}/iterations").json()["data"]
    assert run["config"]["scenario_ids"] == [scenario] and run["config"]["rollouts_per_group"] == 4
    final_iteration = run["final_email"]["iteration"]  # the run's final email is what the page opens on
    assert page.text_content("#email-subject") == iterations[final_iteration]["email"]["subject"]
    assert page.text_content("#email-iteration") == f"Iteration {final_iteration}"
    assert page.text_content("#email-score") == f"Judge score {iterations[final_iteration]['email']['score']:.2f}"
    assert page.locator("#iterations tbody tr").count() == 7
    assert f"step {iterations[1]['training']['step']}, loss" in page.locator("#iterations tbody tr").nth(1).text_content()
    finalized = int(iterations[1]["metrics"]["end/finalized"])
    assert f"{finalized} finalized" in page.locator("#iterations tbody tr").nth(1).text_content()

    # a citation opens its node's fact
    first_citation = iterations[final_iteration]["email"]["citations"][0]
    page.click(f"a.cite[data-node='{first_citation}']")
    page.wait_for_selector("#fact h4")
    with server.client() as client:
        node = client.get(f"/graphs/demo/nodes/{first_citation}").json()
    assert node["title"] in page.text_content("#fact h4") and node["text"] in page.text_content("#fact")
    assert page.locator("#node-scores tbody tr").count() == 10
    # the demo's simulated provider sent each published email: reply rate and judge score per iteration
    sync_api.expect(page.locator("#outcomes-chart circle.reply-point")).to_have_count(7)
    assert "rank correlation of judge and replies" in page.text_content("#calibration")
    sync_api.expect(page.locator("#key-form")).to_be_hidden()
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    if os.environ.get("UPDATE_SCREENSHOT"):
        page.screenshot(path=str(README_SCREENSHOT), full_page=True)

    # the word diff against the previous iteration, and the runs list
    page.click("#iterations tbody tr:nth-child(2)")  # iteration 1
    assert page.text_content("#email-iteration") == "Iteration 1"
    without_deletions = "el => { const c = el.cloneNode(true); c.querySelectorAll('del').forEach(d => d.remove()); return c.textContent; }"
    without_insertions = without_deletions.replace("'del'", "'ins'")
    assert page.eval_on_selector("#email-body", without_deletions) == iterations[1]["email"]["body"]
    assert page.eval_on_selector("#email-body", without_insertions) == iterations[0]["email"]["body"]
    page.click("header nav a:text('Runs')")
    page.wait_for_selector(f"#runs a[href='#/runs/{run_id}']")
    assert "6 / 6" in page.locator("#runs tr", has=page.locator(f"a[href='#/runs/{run_id}']")).text_content()


def test_a_finished_run_shows_its_webhook_deliveries(server, page):
    """A finished run opened later: no live stream, the deliveries table from GET /runs/{id}/webhook-deliveries."""
    receiver = Receiver()
    with server.client() as client:
        run_id = client.post("/learn-loop", json={"iterations": 1, "rollouts_per_group": 2, "webhook_url": receiver.url,
                                                  "scenario_ids": ["scn-healthcare-cto"]}).json()["run_id"]
        assert wait_for_status(client, run_id)["status"] == "succeeded"
        wait_for(lambda: {d["status"] for d in client.get(f"/runs/{run_id}/webhook-deliveries").json()["data"]} == {"delivered"})
    page.goto(f"{server.url}/ui#/runs/{run_id}")
    page.fill("#key-input", KEY)
    page.click("#key-form button[type=submit]")
    sync_api.expect(page.locator("#deliveries tbody tr")).to_have_count(4)  # run.started, iteration 0 and 1, run.succeeded
    assert page.locator("#deliveries .badge.delivered").count() == 4
    sync_api.expect(page.locator("svg.chart circle.point")).to_have_count(1)
    receiver.close()
    # opened again, the page asks with the run's ETag: the server answers 304 and the browser keeps its copy
    page.click("header nav a:text('Runs')")
    page.click(f"#runs a[href='#/runs/{run_id}']")
    sync_api.expect(page.locator("svg.chart circle.point")).to_have_count(1)
    reads = "url => performance.getEntriesByType('resource').filter(e => e.name === url).map(e => [e.transferSize, e.encodedBodySize])"
    for url in (f"{server.url}/runs/{run_id}", f"{server.url}/runs/{run_id}/iterations"):
        sizes = page.evaluate(reads, url)
        (first, first_body), (again, again_body) = sizes[-2:]  # earlier: a 401 before the key was entered
        assert first > first_body == again_body > again > 0, (url, sizes)  # the second read: headers only


def test_the_runs_page_shows_each_deployment_with_its_traffic_and_intervals(server, page):
    with server.client() as client:
        run_id = client.post("/learn-loop", json={"iterations": 2, "rollouts_per_group": 2,
                                                  "scenario_ids": ["scn-saas-cfo"]}).json()["run_id"]
        assert wait_for_status(client, run_id)["status"] == "succeeded"
        assert client.put("/graphs/demo/deployment", json={
            "policy": f"{run_id}@2", "challengers": [{"policy": f"{run_id}@1", "share": 0.25}],
            "require_evidence": True, "sequential": True}).status_code == 200
        evaluation = client.post("/evaluations", json={"graph_id": "demo", "policies": [f"{run_id}@2", f"{run_id}@1"]}).json()
        report = wait_for(lambda: (e := client.get(f"/evaluations/{evaluation['evaluation_id']}").json())["status"] == "succeeded" and e)
    page.goto(f"{server.url}/ui")
    page.fill("#key-input", KEY)
    page.click("#key-form button[type=submit]")
    rows = page.locator("#deployments tbody tr")
    sync_api.expect(rows).to_have_count(2)
    champion, challenger = rows.nth(0).text_content(), rows.nth(1).text_content()
    assert f"{run_id}@2" in champion and "75 %" in champion and f"{run_id}@1" in challenger and "25 %" in challenger
    judge = report["result"]["policies"][0]["judge"]
    assert f"{judge['value']:.3f} [{judge['low']:.3f}, {judge['high']:.3f}]" in champion
    assert "no logged sends" in champion  # nothing sent yet: the reason, not a number
    assert "needs evidence (always-valid intervals)" in page.text_content("#deployments")
    assert f"promoted {run_id}@2 by request" in page.text_content("#deployments .history")  # the graph's first champion


def test_swagger_ui_renders(server, page):
    page.goto(server.url + "/docs")
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
    assert page.locator(".swagger-ui .opblock").count() > 10


def test_redoc_renders_without_asking_another_host(server, browser):
    """ReDoc's sidebar would fetch Redocly's logo from their CDN: the page's policy stops it in the browser."""
    context = browser.new_context()
    page = context.new_page()
    requested, failed = [], {}
    page.on("request", lambda request: requested.append(request.url))
    page.on("requestfailed", lambda request: failed.update({request.url: request.failure}))
    page.goto(server.url + "/redoc")
    page.wait_for_selector(".api-content h1", timeout=20_000)
    page.wait_for_load_state("networkidle")
    context.close()
    outside = [url for url in requested if not url.startswith((server.url, "blob:" + server.url))]
    assert all(failed.get(url) == "csp" for url in outside), (outside, failed)
    assert not [url for url in failed if url.startswith(server.url)], failed


def report_sends(client, ref: str, delivered: int, replies: int, prefix: str) -> None:
    """What a provider reports for one email sent to `delivered` distinct recipients, `replies` of whom answered."""
    events = [{"ref": ref, "type": "delivered", "occurred_at": "2026-11-20T09:00:00Z", "id": f"{prefix}-d{i}",
               "recipient": f"{prefix}{i}@example.org"} for i in range(delivered)]
    events += [{"ref": ref, "type": "replied", "occurred_at": "2026-11-20T10:00:00Z", "id": f"{prefix}-r{i}",
                "recipient": f"{prefix}{i}@example.org"} for i in range(replies)]
    answer = client.post("/outcomes", json={"events": events}).json()
    assert answer["accepted"] == delivered + replies and answer["unattributed"] == 0, answer


def test_the_outcomes_of_30_sends_read_as_figures(server, page):
    """One iteration's email sent 30 times: the chart puts its one point mid-width with its figures beside it, on a
    scale fitted to the rate, and the totals read as labelled bars (not one bar on the axis)."""
    with server.client() as client:
        run_id = client.post("/learn-loop", json={"iterations": 1, "rollouts_per_group": 2, "feedback_source": "none",
                                                  "scenario_ids": ["scn-saas-cfo"]}).json()["run_id"]
        assert wait_for_status(client, run_id)["status"] == "succeeded"
        ref = client.get(f"/runs/{run_id}/iterations/1").json()["email"]["ref"]
        report_sends(client, ref, delivered=30, replies=3, prefix=f"{run_id[-6:]}-")
        [sent] = client.get(f"/runs/{run_id}/outcomes").json()["data"]
    page.goto(f"{server.url}/ui#/runs/{run_id}")
    page.fill("#key-input", KEY)
    page.click("#key-form button[type=submit]")
    point = page.locator("#outcomes-chart circle.reply-point")
    sync_api.expect(point).to_have_count(1)
    cx = float(point.get_attribute("cx"))
    assert 200 < cx < 360, cx  # mid-width, not on the axis
    assert page.text_content("#outcomes-chart .point-label") == "10.0 % · 3 of 30"
    rates = [float(t[:-2]) / 100 for t in page.locator("#outcomes-chart text.tick").all_text_contents() if t.endswith(" %")]
    assert sent["reply_rate_interval"][1] <= max(rates) < 1  # a scale fitted to the rate and its interval
    funnel = {row.get_attribute("data-step"): row.text_content() for row in page.locator("#outcome-funnel tr").all()}
    assert funnel["delivered"].endswith("30") and funnel["replies"].endswith("3") and "replied" in funnel["replies"]


def test_a_batch_shows_each_draft_with_its_outcomes(server, page):
    with server.client() as client:
        run_id = client.post("/learn-loop", json={"iterations": 1, "rollouts_per_group": 2, "feedback_source": "none",
                                                  "scenario_ids": ["scn-healthcare-cto"]}).json()["run_id"]
        assert wait_for_status(client, run_id)["status"] == "succeeded"
        csv = (Path(__file__).resolve().parents[1] / "data" / "formula_cells.csv").read_bytes()
        batch_id = client.post("/drafts", data={"graph_id": "demo", "policy": f"{run_id}@1"},
                               files={"file": ("p.csv", csv, "text/csv")}).json()["batch_id"]
        wait_for(lambda: client.get(f"/draft-batches/{batch_id}").json()["status"] == "succeeded")
        drafts = client.get(f"/draft-batches/{batch_id}/drafts").json()["data"]
        report_sends(client, drafts[1]["email"]["ref"], delivered=1, replies=1, prefix=f"{batch_id[-6:]}-")
        outcomes = client.get(f"/draft-batches/{batch_id}/outcomes").json()["data"]
    page.goto(f"{server.url}/ui")
    page.fill("#key-input", KEY)
    page.click("#key-form button[type=submit]")
    page.click(f"#batches a[href='#/batches/{batch_id}']")
    page.wait_for_url(f"**/ui#/batches/{batch_id}")
    sync_api.expect(page.locator("#drafts tbody tr")).to_have_count(2)
    sync_api.expect(page.locator("#batch-status")).to_have_text("succeeded")
    for row, draft in zip(page.locator("#drafts tbody tr").all(), drafts, strict=True):
        text = row.text_content()
        assert draft["prospect"]["name"] in text and draft["email"]["subject"] in text
        assert f"{draft['judge_score']:.2f}" in text and (draft["fit"] or "–") in text
    bob = page.locator("#drafts tbody tr[data-prospect='p2'] td.num").all_text_contents()
    assert bob[-3:] == ["1", "0", "1"]  # delivered, opens, replies
    replies = page.text_content("#replies-by-category")
    if "category" in outcomes[0]:  # the batch's outcomes carry the latest reply's category: a column of its own
        assert page.locator("#drafts th").last.text_content() == "Reply"
    classified = {c for o in outcomes for c in (o.get("replies_by_category") or {})} | {
        o["category"] for o in outcomes if o.get("category")}
    if classified:  # replies counted by category
        assert all(category in replies for category in classified), (classified, replies)
    else:
        assert "1 reply from 1 delivered, not classified yet" in replies
