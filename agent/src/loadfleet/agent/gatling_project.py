"""A user's Gatling Maven project, compiled once per content for the Gatling driver.

A project is keyed by the sha256 of its pom.xml, every file under src/ and the hook's classes
(it compiles against them). Its build lives in `<cache>/<key>/`: `classes/` and
`classpath.txt` (Maven's resolved runtime classpath), so a JVM starts on it without Maven.
The cache is $LOADFLEET_GATLING_CACHE, else ~/.cache/loadfleet/gatling.

To build, pom.xml and src/ are copied into a fresh directory beside the entry and Maven runs
there (`mvn -B -q compile dependency:build-classpath`); the directory is then renamed into
place. So the user's tree is never written to, and agents sharing a host never see a
half-built entry (the first rename wins). The hook reaches the compiler as a jar
(`-Dloadfleet.hook=...`, for a system-scope dependency: docs/gatling.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .errors import EngineError

CACHE_ENV = "LOADFLEET_GATLING_CACHE"
MAVEN_ENV = "LOADFLEET_MAVEN"
# "1": run Maven with --offline (every dependency must already be in ~/.m2, as in tests).
MAVEN_OFFLINE_ENV = "LOADFLEET_MAVEN_OFFLINE"
DEFAULT_CACHE = Path.home() / ".cache" / "loadfleet" / "gatling"
# The first build of a project downloads its dependencies; a build that takes longer is stuck.
BUILD_TIMEOUT_S = 600.0
# The plugin version `make gatling` caches, named in full so that Maven needs no plugin metadata.
BUILD_CLASSPATH_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:build-classpath"
ERROR_LINES = 15


@dataclass(frozen=True)
class ProjectBuild:
    """A compiled project: its classes and the runtime classpath Maven resolved for it."""

    root: Path

    @property
    def classpath(self) -> str:
        deps = (self.root / "classpath.txt").read_text().strip()
        return os.pathsep.join(p for p in (str(self.root / "classes"), deps) if p)


def project_key(project: Path, hook_classes: Path) -> str:
    """A digest of pom.xml, src/ and the hook's classes: names (relative) and contents."""
    return _digest(
        [("pom.xml", project / "pom.xml"), *_tree("src", project / "src")], salt=_digest(_tree("", hook_classes))
    )


def _tree(prefix: str, root: Path) -> list[tuple[str, Path]]:
    return [(f"{prefix}/{p.relative_to(root).as_posix()}", p) for p in _files_under(root)]


def _digest(files: list[tuple[str, Path]], salt: str = "") -> str:
    """sha256 over `salt` and (name, content) pairs."""
    digest = hashlib.sha256(salt.encode())
    for name, path in files:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def _files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


async def build_project(
    project: Path, hook_classes: Path, cache: Path | None = None, timeout_s: float = BUILD_TIMEOUT_S
) -> ProjectBuild:
    """The project's build, from the cache or made now; raises EngineError with Maven's error
    lines when it does not compile (or cannot be read, or Maven takes longer than timeout_s)."""
    if not (project / "pom.xml").is_file():
        raise EngineError(f"the Gatling project {project} is not a Maven project on this agent (no pom.xml)")
    cache = Path(cache or os.environ.get(CACHE_ENV) or DEFAULT_CACHE)
    try:
        key = project_key(project, hook_classes)
        entry = cache / key
        if (entry / "classpath.txt").is_file():
            return ProjectBuild(entry)
        cache.mkdir(parents=True, exist_ok=True)
        hook_jar = _hook_jar(hook_classes, cache)
        work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache))
        shutil.copy2(project / "pom.xml", work / "pom.xml")
        if (project / "src").is_dir():
            shutil.copytree(project / "src", work / "src")
    except OSError as exc:
        raise EngineError(f"cannot prepare the Gatling project {project}: {exc}") from exc
    try:
        await _maven(work, hook_jar, project, timeout_s)
        (work / "target" / "classes").mkdir(parents=True, exist_ok=True)  # a project of resources only
        (work / "target" / "classes").rename(work / "classes")
        with contextlib.suppress(OSError):  # another agent on this host built it first: same content
            work.rename(entry)
        return ProjectBuild(entry)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _hook_jar(hook_classes: Path, cache: Path) -> Path:
    """The hook's classes as a jar (Maven's system scope wants a file, not a directory)."""
    jar = cache / f"loadfleet-gatling-hook-{_digest(_tree('', hook_classes))}.jar"
    if not jar.exists():
        tmp = jar.with_name(jar.name + f".{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for path in _files_under(hook_classes):
                out.write(path, path.relative_to(hook_classes).as_posix())
        os.replace(tmp, jar)
    return jar


async def _maven(work: Path, hook_jar: Path, project: Path, timeout_s: float) -> None:
    mvn = os.environ.get(MAVEN_ENV) or shutil.which("mvn")
    if not mvn:
        raise EngineError(
            f"cannot find Maven to build the Gatling project {project} (put mvn on PATH or set ${MAVEN_ENV})"
        )
    offline = ["--offline"] if os.environ.get(MAVEN_OFFLINE_ENV) == "1" else []
    command = [
        mvn,
        "-B",
        "-q",
        *offline,
        "-Dstyle.color=never",
        f"-Dloadfleet.hook={hook_jar}",
        "compile",
        BUILD_CLASSPATH_GOAL,
        f"-Dmdep.outputFile={work / 'classpath.txt'}",
        "-Dmdep.includeScope=runtime",
    ]
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            cwd=work,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except OSError as exc:
        raise EngineError(f"cannot start {mvn}: {exc.strerror}") from exc
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        raise EngineError(f"building the Gatling project {project} took more than {timeout_s:g} s") from None
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if proc.returncode != 0:
        raise EngineError(
            f"the Gatling project {project} does not build (mvn exit status {proc.returncode}): "
            + " | ".join(error_lines(output.decode(errors="replace"), work, project))
        )


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_COMPILER_LINE = re.compile(r"\.java:\[\d+,\d+\]")
_MAVEN_BOILERPLATE = ("To see the full", "Re-run Maven", "For more information", "[Help", "->")


def error_lines(output: str, work: Path, project: Path) -> list[str]:
    """What went wrong, in at most ERROR_LINES lines with paths in the user's tree: the
    compiler's messages (with their `symbol:`/`location:` lines) if any, else Maven's [ERROR]
    lines (Maven prints compiler messages twice: each is kept once)."""
    lines = [_ANSI.sub("", line).replace(str(work), str(project)) for line in output.splitlines()]
    compiler: list[str] = []
    errors: list[str] = []
    for line in lines:
        text = line.strip().removeprefix("[ERROR]").strip()
        if _COMPILER_LINE.search(text) or (compiler and text.startswith(("symbol:", "location:"))):
            compiler.append(text)
        elif line.startswith("[ERROR]") and text and not text.startswith(_MAVEN_BOILERPLATE):
            errors.append(text)
    found = list(dict.fromkeys(compiler or errors)) or [line for line in lines if line.strip()][-ERROR_LINES:]
    return (found or ["no output"])[:ERROR_LINES]
