"""What of a journey the Gatling driver does not run yet, and a job's texts as JobSimulation
sends them.

JobSimulation (agent/gatling) runs weighted requests and sessions; a journey's extractions,
checks, `once` steps, variables, templates and a cookie jar turned off are not mapped to
Gatling yet (docs/gatling.md). The plan's validation refuses them for `driver: gatling`; the
agent refuses such a job too, before any JVM starts, naming each field, since a job that
reached it anyway would otherwise run with its templates sent as text and its checks unjudged.

Templates follow the engine's grammar (agent/engine/src/template.rs): in a run of `$`s just
before a `{`, each `$$` is a literal `$` and an odd one left over opens a `${`. A text without
a template is sent with those escapes applied, as the engine sends it (`$${x}` goes out as `${x}`).
"""

from __future__ import annotations

import re

from loadfleet.v1 import job_pb2

from .errors import JobRefused

# A run of `$` before a `{`: an odd run opens a template, an even one is escaped `$`s.
DOLLARS_BEFORE_BRACE = re.compile(rb"(\$+)\{")
USE_THE_ENGINE = "use `driver: engine`"


def template_at(text: bytes) -> int | None:
    """The byte offset of the first `${` in `text` that opens a template, None when it has none."""
    for run in DOLLARS_BEFORE_BRACE.finditer(text):
        if len(run[1]) % 2:
            return run.end() - 2
    return None


def literal(text: bytes) -> bytes:
    """A template-free text as sent: each `$$` before a `{` is one `$` (`$${` is `${`)."""
    return DOLLARS_BEFORE_BRACE.sub(lambda run: b"$" * (len(run[1]) // 2) + b"{", text)


def journey_problems(spec: job_pb2.JobSpec) -> list[str]:
    """What of a journey the Gatling driver does not run yet, each named by its field in the job."""
    problems = [f"variables ({', '.join(spec.variables)})"] if spec.variables else []
    if spec.session.once:
        problems.append("session.once (steps run once per user)")
    if spec.cookies.off:
        problems.append("cookies.off (Gatling keeps a cookie jar per user)")
    for i, request in enumerate(spec.requests):
        where = f"requests[{i}] ({request.name})"
        if request.extracts:
            problems.append(f"{where}.extracts")
        if request.checks:
            problems.append(f"{where}.checks")
        texts = [("path", request.path.encode()), ("body", request.body)]
        texts += [(f"headers[{j}].value", h.value.encode()) for j, h in enumerate(request.headers)]
        problems += [
            f"{where}.{place}: a template at byte {at}"
            for place, text in texts
            if (at := template_at(text)) is not None
        ]
    return problems


def refuse_journeys(spec: job_pb2.JobSpec) -> None:
    """JobRefused when the job holds what the Gatling driver does not run (journey_problems)."""
    if problems := journey_problems(spec):
        raise JobRefused(
            "the Gatling driver does not run journeys yet (checks, extractions, templates, once-steps): "
            f"{'; '.join(problems)}; {USE_THE_ENGINE}"
        )


def literal_spec(spec: job_pb2.JobSpec) -> job_pb2.JobSpec:
    """The job as JobSimulation sends it: paths, header values and bodies with escapes applied."""
    sent = job_pb2.JobSpec()
    sent.CopyFrom(spec)
    for request in sent.requests:
        request.path = literal(request.path.encode()).decode()
        request.body = literal(request.body)
        for header in request.headers:
            header.value = literal(header.value.encode()).decode()
    return sent
