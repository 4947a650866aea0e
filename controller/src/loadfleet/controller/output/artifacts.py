"""An agent's files in a run's directory (agent.proto's Artifact: Gatling's HTML report):
received in chunks into a hidden partial file, unpacked under GATLING_DIR/<agent-id>/ after
the last one, and bounded per agent and run (`ArtifactBudget`). Names from agents are plain
names and no member may leave that directory."""

from __future__ import annotations

import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from loadfleet.controller.output.report.rundata import GATLING_DIR

# An agent's artifact larger than this, packed or unpacked, is refused (a report is a few MB).
MAX_ARTIFACT_BYTES = 512 * 2**20
# What one agent may store in one run's directory, all its artifacts together: bytes received
# plus bytes unpacked (a Gatling report is a few MB zipped, tens unpacked; a sweep sends one a
# step), artifacts begun, and files unpacked (a report has a page per request name, and a
# Gatling simulation may name up to 1,000). Past any of these, its chunks are refused: a
# run's agents together may take at most agents x MAX_AGENT_ARTIFACT_BYTES of its disk.
MAX_AGENT_ARTIFACT_BYTES = 512 * 2**20
MAX_AGENT_ARTIFACTS = 64
MAX_AGENT_ARTIFACT_FILES = 20_000
# An artifact's name: a plain file name, as the agent's (`gatling-report.zip`).
_ARTIFACT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_PART_SUFFIX = ".part"


@dataclass
class ArtifactBudget:
    """What one agent may still store in one run's directory (see MAX_AGENT_ARTIFACT_*);
    `store_artifact_chunk` charges it. Bytes are charged as they come and never given back."""

    bytes_left: int = MAX_AGENT_ARTIFACT_BYTES
    artifacts_left: int = MAX_AGENT_ARTIFACTS
    files_left: int = MAX_AGENT_ARTIFACT_FILES


def store_artifact_chunk(
    run_dir: Path, agent_id: str, name: str, data: bytes, *, last: bool, budget: ArtifactBudget | None = None
) -> Path | None:
    """Appends one chunk of an agent's file (agent.proto's Artifact) to a hidden partial file;
    after the last one, a zip is unpacked into GATLING_DIR/<agent_id>/ and the directory
    returned. Names from agents must be plain names and members must stay inside that
    directory (no path traversal); everything is charged to `budget` (the agent's in this
    run). Raises ValueError when a name is not plain, the file is not a zip, or it would take
    the file or the budget past its bounds (the partial file is then removed). A partial file
    whose last chunk never comes is removed by `discard_partials` when the run closes."""
    plain_id = agent_id and not agent_id.startswith(".") and "/" not in agent_id and "\\" not in agent_id
    if not plain_id or len(agent_id.encode()) > 200:
        raise ValueError(f"agent id {agent_id!r} is not a plain file name")
    if not _ARTIFACT_NAME.fullmatch(name):
        raise ValueError(f"artifact name {name[:120]!r} is not a plain file name")
    budget = budget or ArtifactBudget()
    dest = run_dir / GATLING_DIR / agent_id
    part = dest / f".{name}{_PART_SUFFIX}"
    size = part.stat().st_size if part.exists() else 0
    problem = ""
    if size + len(data) > MAX_ARTIFACT_BYTES:
        problem = f"{name} from {agent_id} is larger than {MAX_ARTIFACT_BYTES} bytes"
    elif len(data) > budget.bytes_left:
        problem = f"{agent_id}'s artifacts would take more than {MAX_AGENT_ARTIFACT_BYTES} bytes of the run"
    elif not size and budget.artifacts_left <= 0:
        problem = f"{agent_id} began more than {MAX_AGENT_ARTIFACTS} artifacts in the run"
    if problem:
        part.unlink(missing_ok=True)
        raise ValueError(problem)
    budget.bytes_left -= len(data)
    budget.artifacts_left -= 0 if size else 1
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with part.open("ab") as f:
            f.write(data)
    except OSError:
        part.unlink(missing_ok=True)  # a full disk: its room given back, the file incomplete
        raise
    if not last:
        return None
    try:
        _unzip_inside(part, dest, budget)
    finally:
        part.unlink(missing_ok=True)
    return dest


def discard_partials(run_dir: Path) -> None:
    """Removes the partial files of artifacts whose last chunk never came (the run is closed)."""
    for part in (run_dir / GATLING_DIR).glob(f"*/.*{_PART_SUFFIX}"):
        part.unlink(missing_ok=True)


def _unzip_inside(archive: Path, dest: Path, budget: ArtifactBudget) -> None:
    root = dest.resolve()
    try:
        with zipfile.ZipFile(archive) as z:
            members = [m for m in z.infolist() if not m.is_dir()]
            unpacked = sum(m.file_size for m in members)
            if unpacked > min(MAX_ARTIFACT_BYTES, budget.bytes_left):
                raise ValueError(f"{archive.name} unpacks to {unpacked} bytes, more than its agent may store")
            if len(members) > budget.files_left:
                raise ValueError(f"{archive.name} holds {len(members)} files, more than its agent may store")
            targets = [(m, (root / m.filename).resolve()) for m in members]
            outside = [m.filename for m, target in targets if not target.is_relative_to(root)]
            if outside:  # checked before anything is written
                raise ValueError(f"{archive.name}: {outside[0]!r} points outside {dest}")
            budget.bytes_left -= unpacked
            budget.files_left -= len(members)
            for member, target in targets:
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(member) as src, target.open("wb") as out:
                    shutil.copyfileobj(src, out)  # a piece at a time: a member may be 512 MiB
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{archive.name} is not a zip file: {exc}") from exc
