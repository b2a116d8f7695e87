"""Docker does not run on these machines, so the compose file is checked by reading it: the
services exist, wire to each other, expose the documented ports, and the app image builds from
files that exist."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from wingsmith.domain.config import SEARCH_ATTRIBUTES

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_and_ports():
    services = _compose()["services"]
    assert {"postgres", "temporal", "temporal-ui", "api", "worker"} <= set(services)
    assert "8000:8000" in services["api"]["ports"]
    assert "7233:7233" in services["temporal"]["ports"]
    assert any(p.endswith(":8080") for p in services["temporal-ui"]["ports"])


def test_temporal_persists_to_postgres_and_the_app_points_at_both():
    services = _compose()["services"]
    env = services["temporal"]["environment"]
    assert env["DB"].startswith("postgres") and env["POSTGRES_SEEDS"] == "postgres"
    for role in ("api", "worker"):
        app_env = services[role]["environment"]
        assert "@postgres:5432/" in app_env["DATABASE_URL"]
        assert app_env["TEMPORAL_ADDRESS"] == "temporal:7233"
        assert services[role]["build"] == "."
    assert services["worker"]["command"][-1] == "worker" and services["api"]["command"][-1] == "api"
    assert services["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"


def test_search_attributes_are_registered_by_the_setup_job():
    script = " ".join(_compose()["services"]["temporal-setup"]["command"])
    for name, kind in SEARCH_ATTRIBUTES.items():
        assert f"{name}={kind}" in script


def test_dockerfile_copies_only_what_exists():
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), src


def test_prometheus_scrapes_every_process_of_the_plane():
    services = _compose()["services"]
    assert {"gateway", "prometheus", "grafana"} <= set(services)
    mount = next(v for v in services["prometheus"]["volumes"] if v.endswith(":/etc/prometheus/prometheus.yml:ro"))
    config = yaml.safe_load((ROOT / mount.split(":")[0]).read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    # Each target is a compose service on the port its process serves /metrics on.
    assert targets == {"wingsmith-api": ["api:8000"], "wingsmith-worker": ["worker:9464"],
                       "wingsmith-gateway": ["gateway:8080"]}
    assert "9464" in services["worker"]["expose"] and services["worker"]["environment"][
        "WINGSMITH_WORKER_METRICS_HOST"] == "0.0.0.0"
    assert services["gateway"]["command"][services["gateway"]["command"].index("--port") + 1] == "8080"
    assert services["api"]["environment"]["WINGSMITH_GATEWAY_URL"] == "http://gateway:8080"


def test_grafana_provisions_the_dashboard_from_prometheus():
    grafana = _compose()["services"]["grafana"]
    host = {container: ROOT / src for src, container in (m.split(":")[:2] for m in grafana["volumes"])}
    source = yaml.safe_load((host["/etc/grafana/provisioning"] / "datasources" / "prometheus.yml").read_text())
    datasource = source["datasources"][0]
    assert datasource["type"] == "prometheus" and datasource["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((host["/etc/grafana/provisioning"] / "dashboards" / "wingsmith.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    assert path in host and (host[path] / "wingsmith.json").exists()
    dashboard = json.loads((host[path] / "wingsmith.json").read_text())
    uids = {t["datasource"]["uid"] for p in dashboard["panels"] for t in p.get("targets", [])}
    assert uids == {datasource["uid"]}
