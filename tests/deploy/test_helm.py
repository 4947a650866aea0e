"""The Helm chart deploy/helm/loadfleet: helm lints it and renders it, and the rendered
manifests hold what a cluster needs (images and commands, ports, secrets mounted where the
commands read them, probes, resource requests, one agent per node); the rendered controller
command and agent environment, run here as Kubernetes would run them, make an agent join
the controller with its labels and allow-list."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from support.pki import make_pki
from support.procs import REPO, free_port, program, wait_for_port

CHART = REPO / "deploy" / "helm" / "loadfleet"
# helm built by `go install` assumes Kubernetes 1.20 unless told; the chart needs 1.25+.
KUBE_VERSION = "1.31.0"
RELEASE = "lf"


def helm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([program("helm"), *args], capture_output=True, text=True, timeout=120)


def render(*sets: str) -> dict[tuple[str, str], dict]:
    """The manifests, by (kind, name)."""
    result = helm(
        "template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION, *(arg for s in sets for arg in ("--set", s))
    )
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_helm_lints_the_chart_strictly():
    result = helm("lint", "--strict", "--kube-version", KUBE_VERSION, str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(
    "sets, message",
    [
        (("agents.kind=Pod",), "value must be one of 'Deployment', 'DaemonSet'"),
        (("agents.cores=0",), "/agents/cores"),
        (("grafana.enabled=true",), "grafana.enabled needs influxdb.enabled"),
    ],
)
def test_wrong_values_are_refused_with_their_path(sets, message):
    result = helm(
        "template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION, *(arg for s in sets for arg in ("--set", s))
    )
    assert result.returncode != 0 and message in result.stderr, result.stderr


def container(manifest: dict) -> dict:
    [found] = manifest["spec"]["template"]["spec"]["containers"]
    return found


def mounted_secret(manifest: dict, path: str) -> tuple[str, str]:
    """(secret name, mount path) of the secret volume that holds file `path`."""
    pod = manifest["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    for mount in container(manifest)["volumeMounts"]:
        if path.startswith(mount["mountPath"] + "/") and "secret" in volumes[mount["name"]]:
            assert mount.get("readOnly") is True
            return volumes[mount["name"]]["secret"]["secretName"], mount["mountPath"]
    raise AssertionError(f"{path} is on no secret volume")


def test_the_controller_serves_tls_from_its_secret_on_one_replica_with_its_runs_on_a_volume():
    manifests = render("imageRegistry=registry.example/lt")
    deployment = manifests["Deployment", "lf-loadfleet-controller"]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    c = container(deployment)
    assert c["image"] == "registry.example/lt/loadfleet-controller:0.1.0"
    assert c["command"] == ["loadfleet"]
    args = c["args"]
    assert args[args.index("controller") + 1 : args.index("controller") + 3] == ["--listen", "0.0.0.0:7700"]
    for flag in ("--tls-cert", "--tls-key", "--tls-ca"):
        assert mounted_secret(deployment, args[args.index(flag) + 1]) == ("loadfleet-controller-tls", "/pki")
    assert "--insecure" not in args
    assert c["ports"] == [{"name": "grpc", "containerPort": 7700, "protocol": "TCP"}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["tcpSocket"] == {"port": "grpc"}, probe
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    assert c["securityContext"]["readOnlyRootFilesystem"] is True

    runs = args[args.index("--runs-dir") + 1]
    [mount] = [m for m in c["volumeMounts"] if runs.startswith(m["mountPath"] + "/")]
    [volume] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    claim = manifests["PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"

    service = manifests["Service", "lf-loadfleet-controller"]
    assert service["spec"]["ports"] == [{"name": "grpc", "port": 7700, "targetPort": "grpc", "protocol": "TCP"}]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def agent_env(manifest: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(manifest)["env"]}


def test_agents_are_one_per_node_by_anti_affinity_with_their_nodes_certificate():
    manifests = render("agents.replicas=60", "agents.labels.zone=a", "agents.allowTargets=10.20.0.0/16")
    agents = manifests["Deployment", "lf-loadfleet-agent"]
    assert agents["spec"]["replicas"] == 60
    pod = agents["spec"]["template"]
    [rule] = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert rule["topologyKey"] == "kubernetes.io/hostname"
    assert rule["labelSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert rule["labelSelector"]["matchLabels"] == agents["spec"]["selector"]["matchLabels"]

    c = container(agents)
    assert c["image"] == "loadfleet-agent:0.1.0" and c["command"] == ["loadfleet-agent"]
    assert c["args"][c["args"].index("--labels") + 1] == "zone=a"
    env = agent_env(agents)
    assert env["LOADFLEET_CONTROLLER"] == "lf-loadfleet-controller:7700"
    assert env["LOADFLEET_ALLOW_TARGETS"] == "10.20.0.0/16"
    [node] = [e for e in c["env"] if e["name"] == "NODE_NAME"]
    assert node["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["LOADFLEET_TLS_CERT"] == "/pki/agent-$(NODE_NAME).crt"
    for key in ("LOADFLEET_TLS_CA", "LOADFLEET_TLS_CERT", "LOADFLEET_TLS_KEY"):
        assert mounted_secret(agents, env[key]) == ("loadfleet-agents-tls", "/pki")
    requests, limits = c["resources"]["requests"], c["resources"]["limits"]
    assert requests["cpu"] == limits["cpu"] == c["args"][c["args"].index("--cores") + 1], (
        "a load generator owns the cores it splits its share over"
    )


def test_agents_as_a_daemonset_have_no_replica_count_and_need_no_anti_affinity():
    agents = render("agents.kind=DaemonSet", "agents.nodeSelector.pool=load")["DaemonSet", "lf-loadfleet-agent"]
    spec = agents["spec"]
    assert "replicas" not in spec and "affinity" not in spec["template"]["spec"]
    assert spec["template"]["spec"]["nodeSelector"] == {"pool": "load"}


def test_influxdb_and_grafana_with_the_shipped_dashboards_provisioned_from_config_maps():
    manifests = render("influxdb.enabled=true", "grafana.enabled=true")
    controller_env = agent_env(manifests["Deployment", "lf-loadfleet-controller"])
    assert controller_env["LOADFLEET_INFLUX_URL"] == "http://lf-loadfleet-influxdb:8086"
    influx = container(manifests["Deployment", "lf-loadfleet-influxdb"])
    assert influx["image"] == "influxdb:1.8.10" and influx["readinessProbe"]["httpGet"]["path"] == "/ping"
    assert manifests["Service", "lf-loadfleet-influxdb"]["spec"]["ports"][0]["port"] == 8086

    grafana = manifests["Deployment", "lf-loadfleet-grafana"]
    g = container(grafana)
    assert g["readinessProbe"]["httpGet"] == {"path": "/api/health", "port": "http"}
    assert {"cpu", "memory"} <= set(g["resources"]["requests"])
    assert agent_env(grafana)["LOADFLEET_INFLUX_URL"] == "http://lf-loadfleet-influxdb:8086"
    dashboards = manifests["ConfigMap", "lf-loadfleet-grafana-dashboards"]["data"]
    shipped = {p.name: json.loads(p.read_text()) for p in (REPO / "dashboards").glob("*.json")}
    assert {name: json.loads(text) for name, text in dashboards.items()} == shipped
    provider = yaml.safe_load(manifests["ConfigMap", "lf-loadfleet-grafana-provisioning"]["data"]["dashboards.yaml"])
    path = provider["providers"][0]["options"]["path"]
    volumes = {v["name"]: v for v in grafana["spec"]["template"]["spec"]["volumes"]}
    [mount] = [m for m in g["volumeMounts"] if m["mountPath"] == path]
    assert volumes[mount["name"]]["configMap"]["name"] == "lf-loadfleet-grafana-dashboards"
    datasource = yaml.safe_load(manifests["ConfigMap", "lf-loadfleet-grafana-provisioning"]["data"]["datasources.yaml"])
    assert datasource["datasources"][0]["uid"] == "loadfleet-influxdb"


def test_every_container_requests_resources_and_runs_without_privileges():
    for (kind, name), manifest in render("influxdb.enabled=true", "grafana.enabled=true").items():
        if kind not in ("Deployment", "DaemonSet"):
            continue
        pod = manifest["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        for c in pod["containers"]:
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), name
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}, name


def kubernetes_expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) references to variables defined before."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def test_the_rendered_commands_make_an_agent_join_the_controller(processes, tmp_path):
    manifests = render("agents.labels.zone=a", "agents.allowTargets=10.20.0.0/16", "agents.cores=1")
    pki = make_pki(tmp_path / "pki", agents=("node-7",))
    secret_files = {"tls.crt": pki.cert("controller"), "tls.key": pki.key("controller"), "ca.crt": pki.ca}
    controller_pki = tmp_path / "controller-pki"  # the controller Secret's keys, as Kubernetes mounts them
    controller_pki.mkdir()
    for key, source in secret_files.items():
        shutil.copy(source, controller_pki / key)
    port = free_port()
    bin_dir = Path(program("loadfleet")).parent

    c = container(manifests["Deployment", "lf-loadfleet-controller"])
    args = [
        a.replace("/pki/", f"{controller_pki}/")
        .replace("0.0.0.0:7700", f"127.0.0.1:{port}")
        .replace("/data/", f"{tmp_path}/data/")
        for a in c["args"]
    ]
    processes.start("controller", [str(bin_dir / c["command"][0]), *args])
    wait_for_port("127.0.0.1", port)

    a = container(manifests["Deployment", "lf-loadfleet-agent"])
    env: dict[str, str] = {"PATH": "/usr/bin:/bin", "NODE_NAME": "node-7"}  # the downward API's spec.nodeName
    for entry in a["env"]:
        if "value" in entry:
            env[entry["name"]] = kubernetes_expand(entry["value"].replace("/pki/", f"{pki.dir}/"), env)
    env["LOADFLEET_CONTROLLER"] = f"localhost:{port}"  # the Service's name, here
    agent_args = [arg.replace("/var/lib/loadfleet/", f"{tmp_path}/agent/") for arg in a["args"]]
    processes.start("agent", [str(bin_dir / a["command"][0]), *agent_args], env=env)

    deadline = time.monotonic() + 30
    while True:
        listed = subprocess.run(
            [
                program("loadfleet"),
                "agents",
                "--json",
                "--controller",
                f"localhost:{port}",
                *pki.client_args("operator", "alice"),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if listed.returncode == 0 and json.loads(listed.stdout):
            break
        assert time.monotonic() < deadline, listed.stdout + listed.stderr
        time.sleep(0.2)
    [agent] = json.loads(listed.stdout)
    assert (agent["agentId"], agent["labels"], agent["allowTargets"], agent["cores"]) == (
        "node-7",
        {"zone": "a"},
        ["10.20.0.0/16"],
        1,
    )
