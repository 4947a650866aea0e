"""The files a Docker user starts from: the compose stack is valid, and every dashboard
points at the provisioned datasource."""
import json
import subprocess

import yaml

from support.procs import REPO


def test_compose_file_is_valid():
    result = subprocess.run(["docker-compose", "-f", str(REPO / "docker-compose.yml"), "config", "-q"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr


def test_dashboards_use_the_provisioned_datasource():
    provisioned = yaml.safe_load((REPO / "dashboards/provisioning/datasources/influxdb.yaml").read_text())
    uid = provisioned["datasources"][0]["uid"]
    dashboards = sorted((REPO / "dashboards").glob("*.json"))
    assert dashboards
    for path in dashboards:
        dashboard = json.loads(path.read_text())
        refs = [p["datasource"]["uid"] for p in dashboard["panels"]]
        refs += [t["datasource"]["uid"] for p in dashboard["panels"] for t in p["targets"]]
        refs += [v["datasource"]["uid"] for v in dashboard["templating"]["list"]]
        assert set(refs) == {uid}, path.name
