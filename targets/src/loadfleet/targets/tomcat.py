"""Apache Tomcat (Debian `tomcat10`) run by the lab from its own CATALINA_BASE under the
state directory — `conf/server.xml` with one HTTP connector on a loopback address and the
docroot as the root context, served by Tomcat's default servlet — never the system service.
The JVM runs in the foreground and is stopped by PID (SIGTERM runs Tomcat's shutdown hook).
No shutdown port (`port="-1"`); the connector binds only once the context is deployed
(`bindOnInit="false"`), so a listening port means the files are served."""

from __future__ import annotations

import shutil
from pathlib import Path
from xml.sax.saxutils import quoteattr

from .daemon import LOCAL, LabError, LabServer, Launcher, find_program, log_tail

CATALINA_HOME = Path("/usr/share/tomcat10")
DEFAULT_WEB_XML = Path("/etc/tomcat10/web.xml")  # the default servlet and MIME types
START_TIMEOUT_S = 60.0  # a JVM on a busy 2-CPU machine
# The same fields as nginx's and Apache's access logs: client, request line, status, body bytes.
LOG_PATTERN = '%a "%r" %s %B'


class TomcatServer(LabServer):
    """Tomcat serving `docroot` as static files."""

    kind = "tomcat"

    def __init__(self, host: str, port: int, docroot: Path, state_dir: Path, name: str, *, launcher: Launcher = LOCAL):
        super().__init__(host, port, state_dir, name, launcher=launcher)
        self.docroot = Path(docroot).resolve()

    @property
    def access_log(self) -> Path:
        return self.dir / "logs" / "access.log"

    def config(self) -> str:
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<Server port="-1" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector address={quoteattr(self.host)} port="{self.port}" protocol="HTTP/1.1"
               connectionTimeout="20000" maxKeepAliveRequests="-1" maxThreads="200" bindOnInit="false"/>
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false">
        <Context path="" docBase={quoteattr(str(self.docroot))}/>
        <Valve className="org.apache.catalina.valves.AccessLogValve" directory={quoteattr(str(self.dir / "logs"))}
               prefix="access" suffix=".log" fileDateFormat="" rotatable="false" buffered="false"
               pattern={quoteattr(LOG_PATTERN)}/>
      </Host>
    </Engine>
  </Service>
</Server>
"""

    def start(self) -> None:
        if not (CATALINA_HOME / "bin" / "bootstrap.jar").exists():
            raise LabError("tomcat10 is not installed (apt-get install tomcat10)")
        for sub in ("conf", "logs", "temp", "webapps", "work"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        (self.dir / "conf" / "server.xml").write_text(self.config())
        shutil.copyfile(DEFAULT_WEB_XML, self.dir / "conf" / "web.xml")
        self.access_log.write_text("")
        (self.dir / "stderr.log").write_text("")
        bin_dir = CATALINA_HOME / "bin"
        argv = [
            find_program("java", "openjdk-17-jre-headless", extra_dirs=("/usr/bin",)),
            "-Xms64m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dcatalina.home={CATALINA_HOME}",
            f"-Dcatalina.base={self.dir}",
            f"-Djava.io.tmpdir={self.dir / 'temp'}",
            "-cp",
            f"{bin_dir / 'bootstrap.jar'}:{bin_dir / 'tomcat-juli.jar'}",
            "org.apache.catalina.startup.Bootstrap",
            "start",
        ]
        proc = self.start_listening(
            argv, what=f"tomcat {self.name}", log=self.dir / "stderr.log", timeout_s=START_TIMEOUT_S
        )
        self.pid = proc.pid

    def error_tail(self) -> str:
        return log_tail(self.dir / "stderr.log", lines=6)


__all__ = ["TomcatServer"]
