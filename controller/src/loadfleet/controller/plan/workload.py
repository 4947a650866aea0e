"""What a workload is made of: the targets it is sent to, its requests and the session its
clients walk. Apart from model.py so that a plan (model.py) and its scenarios (scenarios.py),
which both hold these, do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadfleet.controller.model.credentials import redact_query
from loadfleet.controller.model.load import Think
from loadfleet.controller.plan.journeys import Check, Extract
from loadfleet.controller.plan.protocol import DEFAULT_MAX_STREAMS, HttpProtocol
from loadfleet.controller.plan.targettls import TargetTls


@dataclass(frozen=True)
class Target:
    url: str
    weight: int = 1
    name: str = ""  # for `--target NAME=URL` (target_urls) to replace its url
    protocol: HttpProtocol = HttpProtocol.HTTP1
    max_streams: int = DEFAULT_MAX_STREAMS  # HTTP/2 only (protocol.py)
    tls: TargetTls | None = None  # https only (targettls.py)

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Target:
        protocol = HttpProtocol(doc.get("protocol", HttpProtocol.HTTP1.value))
        streams = doc.get("max_streams", DEFAULT_MAX_STREAMS)
        tls = TargetTls.from_doc(doc["tls"]) if "tls" in doc else None
        return cls(doc["url"].rstrip("/"), doc.get("weight", 1), doc.get("name", ""), protocol, streams, tls)

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"url": self.url, "weight": self.weight}
        if self.name:
            doc["name"] = self.name
        if self.protocol.is_h2:
            doc["protocol"], doc["max_streams"] = self.protocol.value, self.max_streams
        if self.tls is not None:
            doc["tls"] = self.tls.to_doc()
        return doc


@dataclass(frozen=True)
class Request:
    name: str
    path: str
    method: str = "GET"
    weight: int = 1
    headers: tuple[tuple[str, str], ...] = ()
    body: str = ""
    # A journey's (journeys.py): run on each response, the extractions first.
    extracts: tuple[Extract, ...] = ()
    checks: tuple[Check, ...] = ()
    # Redirects followed (0: none; at most 20, the schema and the engine say so), each hop to
    # a plan target only.
    redirects: int = 0


@dataclass(frozen=True)
class SessionStep:
    request: str
    think: Think = Think()


@dataclass(frozen=True)
class Session:
    """What each client or user does: `once` (a login) when it starts and after a restart,
    then these requests in order, `repeat` times (0: until the end)."""

    steps: tuple[SessionStep, ...]
    repeat: int = 0
    once: tuple[SessionStep, ...] = ()


def request_doc(r: Request) -> dict[str, Any]:
    doc = {"name": r.name, "method": r.method, "path": r.path, "weight": r.weight}
    if r.headers:
        doc["headers"] = dict(r.headers)
    if r.body:
        doc["body"] = r.body
    if r.checks:
        doc["check"] = [c.to_doc() for c in r.checks]
    if r.extracts:
        doc["extract"] = [e.to_doc() for e in r.extracts]
    if r.redirects:
        doc["redirects"] = r.redirects
    return doc


def session_doc(s: Session) -> dict[str, Any]:
    doc: dict[str, Any] = {"steps": [_step_doc(st) for st in s.steps], "repeat": s.repeat}
    if s.once:
        doc["once"] = [_step_doc(st) for st in s.once]
    return doc


def _step_doc(step: SessionStep) -> dict[str, Any]:
    return {"request": step.request, "think": step.think.to_doc()}


def session_from_doc(doc: dict[str, Any] | None) -> Session | None:
    if not doc:
        return None
    steps = tuple(SessionStep(s["request"], Think.from_doc(s.get("think"))) for s in doc["steps"])
    once = tuple(SessionStep(s["request"], Think.from_doc(s.get("think"))) for s in doc.get("once", []))
    return Session(steps, doc.get("repeat", 0), once)


def request_from_doc(doc: dict[str, Any]) -> Request:
    return Request(
        name=doc.get("name", redact_query(doc["path"])),  # a name is shown everywhere, a credential nowhere
        path=doc["path"],
        method=doc.get("method", "GET"),
        weight=doc.get("weight", 1),
        headers=tuple(sorted(doc.get("headers", {}).items())),
        body=doc.get("body", ""),
        extracts=tuple(Extract.from_doc(e) for e in doc.get("extract", [])),
        checks=tuple(Check.from_doc(c) for c in doc.get("check", [])),
        redirects=doc.get("redirects", 0),
    )
