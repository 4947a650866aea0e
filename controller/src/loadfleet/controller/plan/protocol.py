"""The HTTP version a target is loaded with (`targets[].protocol`) and the streams one HTTP/2
connection carries (`targets[].max_streams`): their values, and the plan problems they can
have (a scheme that does not fit the protocol, a driver that does not speak HTTP/2).
The engine checks the same again (agent/engine/src/h2target.rs) for a job it is given directly.
"""

from __future__ import annotations

import enum
from typing import Any

from loadfleet.controller.model.driver import DEFAULT_DRIVER, Driver
from loadfleet.controller.model.errors import Problem

# Streams per HTTP/2 connection when the plan gives none: the engine's DEFAULT_MAX_STREAMS.
# A handful, so that 100 clients open 10 connections rather than 1 (one connection would hide
# how a server spreads connections over its workers), well below servers' limits (nginx 128).
DEFAULT_MAX_STREAMS = 10
# The most a plan may ask for (the schema's maximum too).
MAX_MAX_STREAMS = 1000


class HttpProtocol(enum.Enum):
    """`http1`: HTTP/1.1 (plain or TLS); `h2`: HTTP/2 over TLS, the server must select h2 by ALPN;
    `h2c`: HTTP/2 over cleartext TCP by prior knowledge; `auto`: TLS, ALPN's choice of h2 or
    HTTP/1.1."""

    HTTP1 = "http1"
    H2 = "h2"
    H2C = "h2c"
    AUTO = "auto"

    @property
    def is_h2(self) -> bool:
        """Whether the target may be loaded over HTTP/2."""
        return self is not HttpProtocol.HTTP1


def protocol_problems(doc: dict[str, Any]) -> list[Problem]:
    """Each target's protocol fits its URL's scheme; the Gatling driver gets no h2c target."""
    gatling = doc.get("driver", DEFAULT_DRIVER) == Driver.GATLING
    return [problem for i, target in enumerate(doc["targets"]) for problem in _target_problems(i, target, gatling)]


def _target_problems(i: int, target: dict[str, Any], gatling: bool) -> list[Problem]:
    protocol = HttpProtocol(target.get("protocol", HttpProtocol.HTTP1.value))
    url = str(target["url"])
    https, path = url.lower().startswith("https://"), f"targets[{i}].protocol"
    problems = []
    if protocol is HttpProtocol.H2C and https:
        problems.append(Problem(path, f"h2c is HTTP/2 over cleartext TCP; '{url}' is https (use h2)"))
    elif protocol in (HttpProtocol.H2, HttpProtocol.AUTO) and not https:
        problems.append(Problem(path, f"{protocol.value} needs TLS (ALPN); '{url}' is http (use h2c for cleartext)"))
    if gatling and protocol is HttpProtocol.H2C:
        # Gatling enables HTTP/2 only by ALPN over TLS (`enableHttp2`): no prior knowledge.
        words = "the gatling driver cannot load h2c (HTTP/2 over TLS only): use `driver: engine`"
        problems.append(Problem(path, words))
    if gatling and "tls" in target:
        problems.append(Problem(f"targets[{i}].tls", "the gatling driver takes no TLS options: use `driver: engine`"))
    if "max_streams" in target and not protocol.is_h2:
        problems.append(Problem(f"targets[{i}].max_streams", "HTTP/2 only: give protocol h2, h2c or auto"))
    return problems
