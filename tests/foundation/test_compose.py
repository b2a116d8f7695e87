"""Docker does not run on these machines, so the compose file is checked by reading it: the
services exist, wire to each other, expose the documented ports, and the app image builds from
files that exist."""

from __future__ import annotations

from pathlib import Path

import yaml

from wingsmith.config import SEARCH_ATTRIBUTES

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
