"""`GET /metrics`: the queue's figures in Prometheus's text format (`prometheus_client`).

What every replica shares (proposals pending, decision latency, decisions, runs, executors'
refusals, the outbox) is read from the store when Prometheus scrapes, by a custom collector: any
replica answers the same figures, so a dashboard may scrape one or all and take the maximum, never
a sum. What is a replica's own (the HTTP requests it served, polls answered 304 among them, and the
requests it holds in a long poll now) is kept in its process, to be summed across replicas. Labels
are bounded and hold no secret: policy environments (the operator's names), a decision's kind, a
run's ending, a refusal's kind, a notification target's origin and URL digest, a route's template.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Route
from starlette.types import Scope

from reviewer.service.store import QueueStore
from reviewer.service.store.figures import Figures
from reviewer.service.waits import Waits

DECISION_BUCKETS: Final = (60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
"""Seconds from a revision's submission to its decision: a minute to a day (the pending TTL)."""
DEFAULT_ENVIRONMENT: Final = "default"
"""The label of a plan the policy's `[default]` governs (or with no policy at all)."""
UNMATCHED: Final = "unmatched"
"""The route label of a request no route serves (a 404): its path is the caller's, never a label."""


class QueueFigures(Collector):
    """The figures every replica shares, read from the store (`QueueStore.figures`) at each scrape."""

    def __init__(self, store: QueueStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        figures = self.store.figures(DECISION_BUCKETS)
        yield from pending(figures)
        yield decision_latency(figures)
        yield decisions(figures)
        yield runs(figures)
        yield refusals(figures)
        yield from outbox(figures)


HELP: Final = {
    "reviewer_proposals_pending": (
        "Proposals waiting for a decision, by the policy environment of their plan."
    ),
    "reviewer_proposal_oldest_pending_seconds": (
        "How long the longest-waiting pending proposal has waited, by environment."
    ),
    "reviewer_decisions": "Decisions taken, by kind (approve, reject, request_changes).",
    "reviewer_runs": (
        "Claimed runs by ending: completed, stopped, failed, cancelled, reported (no ending "
        "given), running (within its lease) or unknown (its lease ended without a report)."
    ),
    "reviewer_executor_refusals": (
        "Approvals an executor refused before claiming them, by kind: trail (the queue's trail went "
        "backwards or forked), signatures, ledger (it ran before), other."
    ),
    "reviewer_outbox_backlog": (
        "Notifications not yet delivered and still retried, by target (origin and URL digest)."
    ),
    "reviewer_outbox_deliveries": (
        "Notifications in the outbox by target and state (pending, delivered, failed)."
    ),
    "reviewer_outbox_delivery_attempts": "Delivery attempts made, by target.",
}
"""Each family's help text, as Prometheus shows it."""


def gauge(name: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, HELP[name], labels=list(labels))


def counter(name: str, *labels: str) -> CounterMetricFamily:
    return CounterMetricFamily(name, HELP[name], labels=list(labels))


def pending(figures: Figures) -> Iterator[Metric]:
    pending = gauge("reviewer_proposals_pending", "environment")
    waiting = gauge("reviewer_proposal_oldest_pending_seconds", "environment")
    counts: dict[str, int] = {}
    oldest: dict[str, float] = {}
    for group in figures.waiting:
        label = group.environment or DEFAULT_ENVIRONMENT
        counts[label] = counts.get(label, 0) + group.count
        oldest[label] = max(oldest.get(label, 0.0), group.oldest_seconds)
    for label in sorted(counts):
        pending.add_metric([label], counts[label])
        waiting.add_metric([label], oldest[label])
    yield pending
    yield waiting


def decision_latency(figures: Figures) -> Metric:
    """Each decision's time since its revision was submitted, bucketed by the database."""
    latency = figures.latency
    return HistogramMetricFamily(
        "reviewer_decision_latency_seconds",
        "Time from a revision's submission to its decision (approve or reject).",
        buckets=[
            *((repr(bound), count) for bound, count in zip(DECISION_BUCKETS, latency.within, strict=True)),
            ("+Inf", latency.count),
        ],
        sum_value=latency.total,
    )


def decisions(figures: Figures) -> Metric:
    family = counter("reviewer_decisions", "decision")
    for kind, count in figures.decisions.items():
        family.add_metric([kind], count)
    return family


def runs(figures: Figures) -> Metric:
    """Every claimed run by how it ended: a report's ending, `running` within its lease, and
    `unknown` past it without a report (it may have written; a late report still moves it)."""
    family = gauge("reviewer_runs", "ending")
    for ending, count in figures.runs.items():
        family.add_metric([ending], count)
    return family


def refusals(figures: Figures) -> Metric:
    """Every refusal an executor reported: an approval that sits approved and will not run there."""
    family = counter("reviewer_executor_refusals", "kind")
    for kind, count in figures.refusals.items():
        family.add_metric([kind], count)
    return family


def outbox(figures: Figures) -> Iterator[Metric]:
    backlog = gauge("reviewer_outbox_backlog", "target")
    deliveries = gauge("reviewer_outbox_deliveries", "target", "state")
    attempts = counter("reviewer_outbox_delivery_attempts", "target")
    tried: dict[str, int] = {}
    for row in figures.outbox:
        deliveries.add_metric([row.target, row.state], row.count)
        if row.state == "pending":
            backlog.add_metric([row.target], row.count)
        tried[row.target] = tried.get(row.target, 0) + row.attempts
    for target, count in tried.items():
        attempts.add_metric([target], count)
    yield backlog
    yield deliveries
    yield attempts


class Metrics:
    """One app's registry: the shared figures, and the HTTP requests this replica served."""

    def __init__(self, store: QueueStore, routes: Sequence[BaseRoute], waits: Waits) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(QueueFigures(store))
        Gauge(
            "reviewer_waiting_requests",
            "Requests this replica holds until what they ask about changes (long polls with ?wait=).",
            registry=self.registry,
        ).set_function(waits.count)
        self.requests = Counter(
            "reviewer_http_requests",
            "HTTP requests this replica answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.routes = routes

    def count_request(self, scope: Scope, status: int) -> None:
        self.requests.labels(route_label(scope, self.routes), scope["method"], str(status)).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def route_label(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The template of the route that served the request (`/v1/proposals/{proposal_id}`), never
    the path the caller sent; a request answered before routing is matched against the routes."""
    route = scope.get("route")
    if isinstance(route, Route):
        return route.path
    for candidate in routes:
        if isinstance(candidate, Route) and candidate.path_regex.match(scope["path"]):
            return candidate.path
    return UNMATCHED
