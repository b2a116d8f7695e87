"""The plane's own Kubernetes manifests (deploy/kustomize): every overlay, and every component on an
overlay, renders with `kubectl kustomize` and passes the strict type check and the plane's rules
(tests/deploy/checks.py); each rule is shown to catch a manifest broken on purpose."""

from __future__ import annotations

import copy
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import yaml

from tests.deploy.checks import (
    PRODUCT,
    code_reads,
    plane_problems,
    project_version,
    python_module,
)
from tests.deploy.render import (
    COMPONENTS,
    KUSTOMIZE,
    OVERLAYS,
    ROOT,
    KubectlMissing,
    by_kind,
    kubectl,
    processes,
    render,
    render_with,
    secret_refs,
)
from wingsmith.domain.config import SEARCH_ATTRIBUTES, Settings, perf_task_queue
from worker.main import task_queues


@pytest.fixture(scope="module", autouse=True)
def _kubectl() -> None:
    """CI renders every overlay: there a missing kubectl fails; elsewhere it skips."""
    try:
        kubectl()
    except KubectlMissing as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {overlay.name: render(overlay) for overlay in OVERLAYS}


def _included(overlay_name: str) -> set[str]:
    kustomization = yaml.safe_load((KUSTOMIZE / "overlays" / overlay_name / "kustomization.yaml").read_text())
    return {c.rstrip("/").rsplit("/", 1)[-1] for c in kustomization.get("components") or []}


def test_there_are_the_overlays_and_components_the_docs_name():
    assert {"production", "local"} <= {o.name for o in OVERLAYS}
    assert {"service-monitor", "network-policy"} <= {c.name for c in COMPONENTS}


@pytest.mark.parametrize("overlay", [o.name for o in OVERLAYS])
def test_every_overlay_passes_every_check(rendered, overlay):
    assert plane_problems(rendered[overlay]) == []


@pytest.mark.parametrize("component", [c.name for c in COMPONENTS])
def test_every_component_passes_every_check_on_each_overlay_without_it(component):
    overlays = [o for o in OVERLAYS if component not in _included(o.name)]
    assert overlays, f"every overlay includes {component}: render it on its own too"
    for overlay in overlays:
        objects = render_with([KUSTOMIZE / "components" / component], base=overlay)
        assert plane_problems(objects) == [], overlay.name


# --- the checks catch what they are for -----------------------------------------------------------


def _deployment(objects, suffix: str) -> dict[str, Any]:
    return next(d for d in by_kind(objects, "Deployment") if d["metadata"]["name"].endswith(suffix))


def _container(objects, suffix: str) -> dict[str, Any]:
    return _deployment(objects, suffix)["spec"]["template"]["spec"]["containers"][0]


def _env(objects, suffix: str, name: str) -> dict[str, Any]:
    return next(v for v in _container(objects, suffix)["env"] if v["name"] == name)


def _without_pdbs(objects):
    objects[:] = [o for o in objects if o["kind"] != "PodDisruptionBudget"]


def _with_secret(objects):
    objects.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "oops"}, "stringData": {"k": "v"}})


def _with_literal_key(objects):
    var = _env(objects, "api", "WINGSMITH_PAYLOAD_KEY")
    var.pop("valueFrom")
    var["value"] = "c2VjcmV0LWtleQ=="


def _with_state_dir(objects):
    command = _container(objects, "gateway")["command"]
    command[command.index("--state-dir") + 1] = "/srv/routes"


BREAKAGES: dict[str, tuple[Callable[[list], Any], str]] = {
    "an unknown field": (lambda o: _container(o, "api").update(imagePullPolicyy="Always"), "unknown field"),
    "a string for an integer": (lambda o: _deployment(o, "api")["spec"].update(replicas="2"), "expected int"),
    "a deep wrong type": (lambda o: _container(o, "api")["ports"][0].update(containerPort="8000"), "expected int"),
    "a missing required field": (lambda o: _container(o, "api").pop("name"), "required by V1Container"),
    "a kind in the wrong group": (lambda o: by_kind(o, "PodDisruptionBudget")[0].update(apiVersion="apps/v1"),
                                  "serves no kind"),
    "an image at latest": (lambda o: _container(o, "api").update(image="wingsmith:latest"), "is :latest"),
    "an image without a tag": (lambda o: _container(o, "api").update(image="wingsmith"), "has no tag"),
    "a literal secret": (_with_literal_key, "is a literal value"),
    "a Secret object": (_with_secret, "a Secret in the manifests"),
    "one gateway": (lambda o: _deployment(o, "gateway")["spec"].update(replicas=1), "the gateway needs 2"),
    "no PodDisruptionBudget": (_without_pdbs, "no PodDisruptionBudget"),
    "a probe on a path the API does not serve": (
        lambda o: _container(o, "api")["readinessProbe"]["httpGet"].update(path="/ready"), "does not serve"),
    "a probe on a port the container lacks": (
        lambda o: _container(o, "gateway")["livenessProbe"]["httpGet"].update(port="admin"), "not a port"),
    "no liveness probe": (lambda o: _container(o, "worker-kube").pop("livenessProbe"), "no livenessProbe"),
    "a server without its port": (lambda o: _container(o, "worker-kube").pop("ports"), "declares no port"),
    "a writable root": (lambda o: _container(o, "api")["securityContext"].update(readOnlyRootFilesystem=False),
                        "readOnlyRootFilesystem"),
    "an added capability": (lambda o: _container(o, "api")["securityContext"]["capabilities"].update(
        add=["NET_ADMIN"]), "capabilities"),
    "root": (lambda o: _deployment(o, "gateway")["spec"]["template"]["spec"]["securityContext"].update(
        runAsNonRoot=False), "runAsNonRoot"),
    "no limits": (lambda o: _container(o, "worker-observe")["resources"].pop("limits"), "no limits"),
    "a setting no code reads": (lambda o: _container(o, "api")["env"].append(
        {"name": "WINGSMITH_LOG_LEVLE", "value": "DEBUG"}), "no code of the plane reads"),
    "a reference to no Secret": (lambda o: _env(o, "api", "WINGSMITH_HF_TOKEN_REF").update(value="HF_TOKEN"),
                                 "not set from a Secret"),
    "a module that does not exist": (lambda o: _container(o, "worker-kube")["command"].__setitem__(2, "workr"),
                                     "no module workr"),
    "a program the image lacks": (lambda o: _container(o, "worker-kube").update(command=["wingsmithd"]),
                                  "does not install"),
    "a package without __main__": (lambda o: _container(o, "worker-kube")["command"].__setitem__(2, "contracts"),
                                   "without __main__"),
    "state outside an emptyDir": (_with_state_dir, "on no emptyDir"),
    "a Service selecting nothing": (lambda o: by_kind(o, "Service")[0]["spec"]["selector"].update(
        {"app.kubernetes.io/component": "nothing"}), "selects no Deployment"),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_the_checks_catch_a_broken_manifest(rendered, breakage):
    objects = copy.deepcopy(rendered["production"])
    assert plane_problems(objects) == []
    breaking, expected = BREAKAGES[breakage]
    breaking(objects)
    problems = plane_problems(objects)
    assert any(expected in p for p in problems), problems


def test_the_service_monitor_check_catches_a_typo():
    monitors = render_with([KUSTOMIZE / "components" / "service-monitor"], base=OVERLAYS[0])
    assert by_kind(monitors, "ServiceMonitor") and plane_problems(monitors) == []
    by_kind(monitors, "ServiceMonitor")[0]["spec"]["endpoints"][0]["intervall"] = "30s"
    assert any("intervall" in p for p in plane_problems(monitors))


# --- the manifests against the code ------------------------------------------------------------------


def _settings_of(env: dict[str, str], monkeypatch) -> Settings:
    for name in list(os.environ):
        if name.startswith(("WINGSMITH_", "TEMPORAL_")) or name == "DATABASE_URL":
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


@pytest.mark.parametrize("overlay", [o.name for o in OVERLAYS])
def test_one_worker_deployment_per_task_queue(rendered, overlay, monkeypatch):
    procs = processes(rendered[overlay], {ref: "x" for ref in secret_refs(rendered[overlay])})
    workers = [p for p in procs.values() if (python_module(p) or "").startswith("worker")]
    served = []
    for p in workers:
        settings = _settings_of(p.env, monkeypatch)
        if python_module(p) == "worker.perf":  # AIConfigurator's own worker: one queue, by its module
            served.append(perf_task_queue(settings.task_queue))
            continue
        assert len(_flag_values(p.command, "--queue")) == 1, f"{p.deployment} polls more than one queue"
        served += _flag_values(p.command, "--queue")
    wanted = [*task_queues(settings), perf_task_queue(settings.task_queue)]
    assert sorted(served) == sorted(wanted)


def _flag_values(command: list[str], flag: str) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == flag]


# `python -m <module> <args>` up to the module's own argument parser, then exit 0: a refused argument
# exits 2 with argparse's message, and nothing is started.
_PARSE_ONLY = """
import argparse, runpy, sys
parse = argparse.ArgumentParser.parse_args
def parse_then_stop(self, *args, **kwargs):
    parse(self, *args, **kwargs)
    sys.exit(0)
argparse.ArgumentParser.parse_args = parse_then_stop
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
sys.exit("the module never parsed its arguments")
"""


def _argparse_modules() -> set[str]:
    """Modules whose __main__ parses its arguments with argparse, so their arguments can be checked
    by their own parser without starting anything."""
    found = set()
    for package in PRODUCT:
        for main in (ROOT / package).rglob("__main__.py"):
            sources = [main, main.parent / "main.py"]  # `python -m worker` runs worker/main.py's main()
            if any(f.exists() and "argparse" in f.read_text() for f in sources):
                found.add(".".join(main.parent.relative_to(ROOT).parts))
    return found


def test_every_process_accepts_the_arguments_it_is_given(rendered, tmp_path):
    """Each distinct command once (with the environment of its first Deployment: which task queues
    exist is checked per overlay by the test above), two at a time."""
    checkable = _argparse_modules()
    assert {"worker", "gateway", "wingsmith.adapters.store"} <= checkable
    commands: dict[tuple[str, ...], dict[str, str]] = {}
    for objects in rendered.values():
        for proc in processes(objects, {ref: "x" for ref in secret_refs(objects)}).values():
            for p in [proc, *proc.init]:
                if python_module(p) in checkable:
                    commands.setdefault(tuple(p.command), p.env)
    assert commands

    def parses(command: tuple[str, ...]) -> str | None:
        env = {"PATH": os.environ["PATH"], **commands[command], "WINGSMITH_HOME": str(tmp_path)}
        done = subprocess.run([sys.executable, "-c", _PARSE_ONLY, *command[2:]], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        return None if done.returncode == 0 else f"{shlex.join(command)}: {done.stderr}"

    misspelt = ("python", "-m", "gateway", "--prot", "8080")  # the check can fail
    commands[misspelt] = next(iter(commands.values()))
    with ThreadPoolExecutor(2) as pool:
        refused = [r for r in pool.map(parses, commands) if r]
    assert len(refused) == 1 and "--prot" in refused[0], refused


def test_every_env_var_the_manifests_set_is_read_by_the_code(rendered):
    """The same check plane_problems makes, stated on its own: names come from the rendered objects."""
    for overlay, objects in rendered.items():
        for proc in processes(objects, {ref: "x" for ref in secret_refs(objects)}).values():
            if python_module(proc) is None:
                continue
            unread = [name for name in proc.env if not code_reads(name, proc.env)]
            assert unread == [], f"{overlay}: {proc.deployment}"


def test_the_local_temporal_knows_the_planes_search_attributes(rendered):
    temporal = processes(rendered["local"], {ref: "x" for ref in secret_refs(rendered["local"])})["temporal"]
    assert temporal.command[:3] == ["temporal", "server", "start-dev"]
    assert set(_flag_values(temporal.command, "--search-attribute")) == {
        f"{name}={kind}" for name, kind in SEARCH_ATTRIBUTES.items()}


def test_production_pins_the_projects_version(rendered):
    tags = {c["image"].rsplit(":", 1)[1] for d in by_kind(rendered["production"], "Deployment")
            for c in d["spec"]["template"]["spec"]["containers"] if "wingsmith" in c["image"]}
    assert tags == {project_version()}


def test_the_image_holds_every_package_and_runs_as_the_manifests_user(rendered):
    dockerfile = (ROOT / "Dockerfile").read_text()
    copied = {line.split()[1] for line in dockerfile.splitlines() if line.startswith("COPY ")}
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in include}
    assert packages <= copied, f"the Dockerfile does not copy {sorted(packages - copied)}"
    uid = re.search(r"useradd[^\n]*--uid (\d+)", dockerfile)
    assert uid, "the image's user has no fixed uid"
    users = {d["spec"]["template"]["spec"]["securityContext"]["runAsUser"] for d in by_kind(
        rendered["production"], "Deployment")}
    assert users == {int(uid.group(1))}


def test_only_the_gateway_takes_traffic_from_outside():
    objects = render_with([KUSTOMIZE / "components" / "network-policy"], base=OVERLAYS[0])
    policies = by_kind(objects, "NetworkPolicy")
    deny = [p for p in policies if p["spec"]["podSelector"] == {} and "Ingress" in p["spec"]["policyTypes"]
            and not p["spec"].get("ingress")]
    assert deny, "no default deny of ingress"
    pods = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"] for d in by_kind(objects, "Deployment")}
    open_to_anyone = set()
    for policy in policies:
        selector = policy["spec"]["podSelector"].get("matchLabels") or {}
        for rule in policy["spec"].get("ingress") or []:
            peers = rule.get("from")
            # Open to outside: no peers at all, or a peer that is an IP block or any namespace.
            if not peers or any("ipBlock" in p or p.get("namespaceSelector") == {} for p in peers):
                open_to_anyone |= {n for n, labels in pods.items()
                                   if all(labels.get(k) == v for k, v in selector.items())}
    assert open_to_anyone == {n for n in pods if n.endswith("-gateway")}


def test_every_service_monitor_scrapes_a_service_port():
    objects = render_with([KUSTOMIZE / "components" / "service-monitor"], base=OVERLAYS[0])
    services = by_kind(objects, "Service")
    for monitor in by_kind(objects, "ServiceMonitor"):
        wanted = monitor["spec"]["selector"]["matchLabels"]
        matched = [s for s in services if all(s["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())]
        assert matched, monitor["metadata"]["name"]
        ports = {p.get("name") for s in matched for p in s["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports


def test_the_docs_create_every_secret_the_manifests_read():
    """docs/production.md has a `kubectl create secret` for each Secret any overlay or component
    reads, with each key the manifests ask for."""
    doc = (ROOT / "docs" / "production.md").read_text()
    commands = " ".join(re.findall(r"kubectl [^\n]*create secret(?:[^\n]*\\\n)*[^\n]*", doc))
    wanted: set[tuple[str, str]] = set()
    for overlay in OVERLAYS:
        wanted |= secret_refs(render(overlay))
    for component in COMPONENTS:
        wanted |= secret_refs(render_with([component], base=OVERLAYS[0]))
    missing = [f"{name} {key}".strip() for name, key in sorted(wanted)
               if not re.search(rf"create secret \w+ {re.escape(name)}\b", commands)
               or (key and f"--from-literal={key}=" not in commands and f"--from-file={key}=" not in commands)]
    assert missing == []


def test_the_render_helper_gives_each_process_its_command_and_environment(rendered):
    objects = rendered["production"]
    secrets = {ref: f"value-of-{ref[0]}-{ref[1]}" for ref in secret_refs(objects)}
    procs = processes(objects, secrets)
    api = procs["wingsmith-api"]
    assert api.command == ["python", "-m", "api"]
    assert api.env["DATABASE_URL"] == secrets[("wingsmith-postgres", "database-url")]
    assert api.env["TEMPORAL_ADDRESS"]  # from the overlay's settings, through the ConfigMap
    assert [p.command[-1] for p in api.init] == ["migrate"]
    assert procs["wingsmith-gateway"].replicas >= 2
    with pytest.raises(KeyError, match="wingsmith-postgres"):
        processes(objects, {k: v for k, v in secrets.items() if k[0] != "wingsmith-postgres"})
