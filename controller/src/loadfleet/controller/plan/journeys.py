"""A journey's values (docs/plans.md, "Journeys"): what a request takes from its response
into the user's variables (`extract`), the named checks its response must pass (`check`),
and the user's cookie jar (`workload.cookies`). Frozen, read from a plan document already
of the schema's shape and written back to one (`to_doc`), so a resolved plan reads back
equal. Their checks are journeycheck.py's; their protobuf form rpc/journeyconvert.py's.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

# Bounds, each the engine's or the wire's (agent/engine/src: checks.rs, vars.rs, jar.rs,
# pattern.rs), so the plan is refused where the engine would refuse the job.
MAX_CHECKS_PER_REQUEST = 16  # a row's CheckCount list is bounded by the plan
MAX_EXTRACTS_PER_REQUEST = 16
MAX_CHECK_NAME_BYTES = 64  # checks.rs MAX_NAME_BYTES: the key of its pass/fail counts
MAX_VARIABLES = 64  # vars.rs MAX_SLOTS
MAX_DEFAULT_BYTES = 1024  # vars.rs MAX_VALUE_BYTES: a value a variable may hold
MAX_PATTERN_BYTES = 1024  # pattern.rs: a regex's text
MAX_OCCURRENCE = 1000  # the n-th match of a regex or JSONPath, from 0
MAX_COOKIES_LIMIT = 64  # jar.rs: cookies a user's jar may hold
MIN_JAR_BYTES, MAX_JAR_BYTES = 4096, 64 * 1024  # jar.rs: a jar's bytes (one cookie is up to 4 KiB)
EXTRACT_PREFIX = "extract "  # an extraction is counted as the check "extract <var>"


class OnFail(enum.StrEnum):
    """What the user does when a check fails or an extraction finds nothing."""

    CONTINUE = "continue"  # count it and go on with the next step
    RESTART = "restart"  # start the session again as a new user: empty jar and variables, `once` again
    STOP = "stop"  # the user ends (users_stopped); the others go on


class ExtractSource(enum.StrEnum):
    STATUS = "status"  # the status code as text
    HEADER = "header"  # the first header of the name (case-insensitive)
    COOKIE = "cookie"  # the value of the last Set-Cookie of the name
    REGEX = "regex"  # group 1 (the whole match without groups) at `occurrence`
    JSON_POINTER = "json_pointer"  # RFC 6901
    JSON_PATH = "json_path"  # RFC 9535, the node at `occurrence`
    FORM_FIELD = "form_field"  # the value of <input name="NAME" value="...">


# The sources that find the n-th of several matches.
OCCURRENCE_SOURCES = frozenset({ExtractSource.REGEX, ExtractSource.JSON_PATH})


@dataclass(frozen=True)
class Extract:
    var: str
    source: ExtractSource
    argument: str = ""  # the header's, cookie's or field's name, the regex, pointer or path (status: none)
    occurrence: int = 0
    on_missing: OnFail = OnFail.CONTINUE
    default: str = ""  # the value when nothing is found

    @property
    def name(self) -> str:
        """Its name among the request's checks and in samples."""
        return EXTRACT_PREFIX + self.var

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Extract:
        # Exactly one source is given (journeycheck.extract_sources_problem says when not).
        source = next((s for s in ExtractSource if s.value in doc), ExtractSource.STATUS)
        argument = "" if source is ExtractSource.STATUS else doc[source.value]
        return cls(
            var=doc["var"],
            source=source,
            argument=argument,
            occurrence=doc.get("occurrence", 0),
            on_missing=OnFail(doc.get("on_missing", OnFail.CONTINUE)),
            default=doc.get("default", ""),
        )

    def to_doc(self) -> dict[str, Any]:
        status = self.source is ExtractSource.STATUS
        doc: dict[str, Any] = {"var": self.var, self.source.value: True if status else self.argument}
        if self.occurrence:
            doc["occurrence"] = self.occurrence
        if self.on_missing is not OnFail.CONTINUE:
            doc["on_missing"] = self.on_missing.value
        if self.default:
            doc["default"] = self.default
        return doc


class HeaderTest(enum.StrEnum):
    EQUALS = "equals"
    CONTAINS = "contains"
    REGEX = "regex"
    ABSENT = "absent"


@dataclass(frozen=True)
class HeaderCondition:
    """The first header of `name` equals, contains or matches `value`, or there is none."""

    name: str
    test: HeaderTest
    value: str = ""

    def to_doc(self) -> dict[str, Any]:
        return {"name": self.name, self.test.value: True if self.test is HeaderTest.ABSENT else self.value}


@dataclass(frozen=True)
class JsonCondition:
    """The first node of `path` has the text `equals`, or (None) some node exists."""

    path: str
    equals: str | None = None

    def to_doc(self) -> dict[str, Any]:
        return {"path": self.path, **({"exists": True} if self.equals is None else {"equals": self.equals})}


@dataclass(frozen=True)
class Check:
    """A named check: every condition given must hold."""

    name: str
    status: tuple[str, ...] = ()  # codes "200", classes "2xx", ranges "200-299"
    body_contains: str = ""  # templates, like a body
    body_lacks: str = ""
    body_regex: str = ""
    header: HeaderCondition | None = None
    json_path: JsonCondition | None = None
    latency_below_ms: int = 0  # 0: no limit
    on_fail: OnFail = OnFail.CONTINUE

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Check:
        header, json_path = doc.get("header"), doc.get("json_path")
        return cls(
            name=doc["name"],
            status=tuple(str(s) for s in doc.get("status", ())),
            body_contains=doc.get("body_contains", ""),
            body_lacks=doc.get("body_lacks", ""),
            body_regex=doc.get("body_regex", ""),
            header=_header_condition(header) if header else None,
            json_path=JsonCondition(json_path["path"], json_path.get("equals")) if json_path else None,
            latency_below_ms=doc.get("latency_below_ms", 0),
            on_fail=OnFail(doc.get("on_fail", OnFail.CONTINUE)),
        )

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name}
        if self.status:
            doc["status"] = [_status_doc(s) for s in self.status]
        texts = (("body_contains", self.body_contains), ("body_lacks", self.body_lacks))
        doc.update({key: value for key, value in (*texts, ("body_regex", self.body_regex)) if value})
        if self.header:
            doc["header"] = self.header.to_doc()
        if self.json_path:
            doc["json_path"] = self.json_path.to_doc()
        if self.latency_below_ms:
            doc["latency_below_ms"] = self.latency_below_ms
        if self.on_fail is not OnFail.CONTINUE:
            doc["on_fail"] = self.on_fail.value
        return doc


def _status_doc(item: str) -> int | str:
    """A code as the number it was written as (200), anything else as its text ("2xx",
    "0200"), so the plan reads back equal."""
    return int(item) if re.fullmatch(r"[1-9][0-9]*", item) else item


def _header_condition(doc: dict[str, Any]) -> HeaderCondition:
    test = next(t for t in HeaderTest if t.value in doc)
    return HeaderCondition(doc["name"], test, "" if test is HeaderTest.ABSENT else doc[test.value])


@dataclass(frozen=True)
class Cookies:
    """A user's cookie jar: on by default; 0 leaves a cap at the engine's default (16
    cookies, 8 KiB)."""

    enabled: bool = True
    max_cookies: int = 0  # 1..MAX_COOKIES_LIMIT
    max_bytes: int = 0  # MIN_JAR_BYTES..MAX_JAR_BYTES

    @classmethod
    def from_doc(cls, doc: bool | dict[str, Any] | None) -> Cookies:
        if isinstance(doc, dict):
            return cls(max_cookies=doc.get("max_cookies", 0), max_bytes=doc.get("max_bytes", 0))
        return cls(enabled=doc is not False)  # absent or true: the jar with the engine's caps

    def to_doc(self) -> bool | dict[str, Any]:
        if not self.enabled:
            return False
        return {k: v for k, v in (("max_cookies", self.max_cookies), ("max_bytes", self.max_bytes)) if v} or True
