"""Request bodies from files (`workload.requests[].body_file`): read where the plan is, by
`loadfleet run` and `validate`, with the bounds of an inline body, and put into the plan as
its `body`, so the plan sent to the controller is self-contained and a controller never
opens a file a plan names (a confined plan naming one is refused, as for a manifest).

A body file is UTF-8 text (a JSON or form body; templates included, `$${` a literal `${`),
a regular file of at most the schema's `body` bound, read by `loadfleet.wire.files.read_regular`
(never a FIFO or a device, never more than that and one byte).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadfleet.controller.model.errors import Problem
from loadfleet.controller.plan.course import resolve
from loadfleet.controller.plan.schema import plan_schema
from loadfleet.wire.files import FileRefused, read_regular

_REQUEST_SCHEMA: dict[str, Any] = plan_schema()["properties"]["workload"]["properties"]["requests"]["items"]
# An inline body's bound, so a file is refused where the same text inline would be.
MAX_BODY_FILE_BYTES: int = _REQUEST_SCHEMA["properties"]["body"]["maxLength"]


def inline_body_files(doc: dict[str, Any], base_dir: Path | None, *, confined: bool) -> list[Problem]:
    """Replaces each request's `body_file` by its text as `body` (in `doc`); the problems of
    those that cannot be, each named by its path."""
    problems = []
    for i, request in enumerate(doc.get("workload", {}).get("requests", [])):
        if "body_file" not in request:
            continue
        place = f"workload.requests[{i}].body_file"
        if confined:
            why = (
                "the controller reads no files named by a plan: `loadfleet run` reads the body file and sends it inline"
            )
            problems.append(Problem(place, why))
        elif "body" in request:
            problems.append(Problem(place, "give a `body` or a `body_file`, not both"))
        else:
            try:
                request["body"] = _read_body(resolve(request["body_file"], base_dir))
                del request["body_file"]
            except FileRefused as exc:
                problems.append(Problem(place, str(exc)))
    return problems


def _read_body(path: Path) -> str:
    """The file's text, or FileRefused with the file's name and why."""
    try:
        data = read_regular(path, MAX_BODY_FILE_BYTES)
    except FileRefused as exc:
        raise FileRefused(f"{path}: {exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(f"{path} is not UTF-8 text (byte {exc.start:,}): a body file holds text") from None
