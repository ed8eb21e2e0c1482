"""The review page measured from outside, as the on-call reviewer meets it: a real `reviewer serve
--web-origin` on loopback, Debian's chromium through Playwright, the DevTools virtual authenticator
as the phone (it answers at once: a person unlocking a phone adds their own second or two).

- page load to Approve usable: from `goto` of the review link to the buttons enabled by the script
  (the page parsed, its style sheet and script loaded and run), for a 40-call plan and a 2,000-call one
  (its first page of 200 calls);
- a decision's round trip: from the click on Approve to the page saying the queue's answer (the
  statement asked, the assertion made, the decision verified and stored).

Each figure is the median of `--repeat` runs; prints them and the load average; asserts nothing.
With `--screenshots`, also writes the page of `billing-refunds.outlier.json` at a phone's 390x844 and
at 1280x800 to screenshots/ (`review-page-390x844.png`, `review-page-1280x800.png`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.queue_harness import Service, body
from tests.service.web.browser import Device, chromium, device, enrol, web_service

SAMPLES = Path(__file__).resolve().parent.parent / "reviewer" / "sample_proposals"
SCREENSHOTS = Path(__file__).resolve().parent.parent / "screenshots"


def submit_sample(service: Service, agent: str, name: str, proposal_id: str) -> str:
    document = json.loads((SAMPLES / name).read_text())
    document["proposal_id"] = proposal_id
    with service.client(agent) as client:
        answer = client.post("/v1/proposals", content=body(document))
    assert answer.status_code == 201, answer.text
    return proposal_id


def review_link(service: Service, token: str, proposal_id: str) -> str:
    with service.client(token) as client:
        return str(client.get(f"/v1/proposals/{proposal_id}/link").json()["review"])


def load_to_usable(phone: Device, link: str) -> float:
    start = time.perf_counter()
    phone.page.goto(link)
    phone.page.wait_for_selector("main[data-ready='true']")
    return (time.perf_counter() - start) * 1000


def decision_round_trip(phone: Device) -> float:
    status = phone.page.locator("#status")
    start = time.perf_counter()
    phone.page.get_by_role("button", name="Approve", exact=True).click()
    status.filter(has_text="Done").wait_for()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--screenshots", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, chromium() as browser:
        service = web_service(Path(folder))
        try:
            tokens = service.tokens({"alice": "reviewer", "agent": "agent"})
            phone = device(browser)
            enrol(service, tokens["alice"], phone)
            loads: dict[str, list[float]] = {"40 calls": [], "2,000 calls (page 1 of 10)": []}
            trips: list[float] = []
            for run in range(options.repeat):
                small = submit_sample(
                    service, tokens["agent"], "billing-refunds.outlier.json", f"bench-s-{run}"
                )
                large = submit_sample(
                    service, tokens["agent"], "billing-refunds-2000.server.json", f"bench-l-{run}"
                )
                loads["2,000 calls (page 1 of 10)"].append(
                    load_to_usable(phone, review_link(service, tokens["alice"], large))
                )
                loads["40 calls"].append(load_to_usable(phone, review_link(service, tokens["alice"], small)))
                trips.append(decision_round_trip(phone))
            print(f"load average {os.getloadavg()[0]:.1f}; medians of {options.repeat}")
            for plan, times in loads.items():
                print(f"page load to Approve usable, {plan}: {statistics.median(times):,.0f} ms")
            trip = statistics.median(trips)
            print(f"decision round trip (Approve to the queue's answer shown): {trip:,.0f} ms")
            if options.screenshots:
                shoot(service, tokens, browser)
        finally:
            service.stop()


def shoot(service: Service, tokens: dict[str, str], browser: object) -> None:
    """The page an on-call reviewer opens, at a phone's size and a laptop's."""
    proposal_id = submit_sample(
        service, tokens["agent"], "billing-refunds.outlier.json", "refunds-late-deliveries"
    )
    link = review_link(service, tokens["alice"], proposal_id)
    for width, height in ((390, 844), (1280, 800)):
        viewer = device(browser, (width, height))  # type: ignore[arg-type]
        try:
            viewer.page.goto(link)
            viewer.page.wait_for_selector("main[data-ready='true']")
            viewer.page.fill("#reviewer", "alice")
            viewer.page.screenshot(path=str(SCREENSHOTS / f"review-page-{width}x{height}.png"))
        finally:
            viewer.close()


if __name__ == "__main__":
    main()
