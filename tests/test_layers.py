"""Dependencies point one way (docs/architecture.md, issues #32 and #49), and this test is what keeps them so.
The folders say what each file is, and the rules are written by folder:

    wingsmith/domain/ (pure)  <-  wingsmith/adapters/  <-  activities/
    contracts/ (one module per workflow)  <-  workflows/  <-  worker/
    api/ (REST, services)  <-  console/ (pages over the services);  gateway/ (data plane, on adapters only)
    entry points on top: wingsmith/cli/, wingsmith/local/

Every module of wingsmith/ lives in one of its four folders.

The domain and the contracts import no I/O library, and the domain, the contracts and the workflows
make no file or process call of their own (`open`, `Path.read_text`, `os.replace`, `shutil`, `subprocess`:
read from the calls, since `os` and `pathlib` also have pure uses); workflows import only contracts, the domain,
`temporalio` and their own package's modules (they call activities and other workflows by the names in
contracts/), and what they load, at any depth, holds no activity, adapter or I/O library; activities
never import workflows; the API never imports a workflow or an activity, and its process loads no
`kubernetes` client; the stand-ins in sim/ import nothing of the product; no route module imports
another, and neither the console nor a service imports a route (both call api/services/); the gateway
imports no other program (api, console) and the adapters no entry point. Every import
counts, also those inside functions. Of the workflow modules, only workflows/policies.py sets activity
timeouts and retry policies."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.python_source import parse

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("wingsmith", "contracts", "workflows", "activities", "api", "console", "gateway", "worker")
DOMAIN = ("wingsmith.domain",)  # the pure domain, by folder
ADAPTERS = ("wingsmith.adapters",)
ENTRY_POINTS = ("wingsmith.cli", "wingsmith.local")
# Libraries that do I/O (or start it): none may be imported by the domain, the contracts or a workflow.
IO_LIBRARIES = ("asyncpg", "kubernetes", "httpx", "huggingface_hub", "urllib3", "requests", "temporalio.client",
                "temporalio.worker", "temporalio.service", "subprocess", "socket", "fastapi", "starlette",
                "uvicorn", "opentelemetry", "structlog", "prometheus_client.exposition", "jwt")
# package -> top-level packages it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "wingsmith": ("api", "console", "gateway", "workflows", "activities", "worker", "sim", "tests", "bench"),
    "contracts": ("api", "console", "gateway", "workflows", "activities", "worker", "sim", "tests", "bench"),
    "workflows": ("api", "console", "gateway", "activities", "worker", "sim", "tests", "bench"),
    "activities": ("api", "console", "gateway", "workflows", "worker", "sim", "tests", "bench"),
    # The API process serves the console's pages (api/routes/console.py puts them on the map).
    "api": ("gateway", "workflows", "activities", "worker", "sim", "tests", "bench"),
    "console": ("gateway", "workflows", "activities", "worker", "sim", "tests", "bench"),
    # The data plane is a program of its own: it shares adapters with the plane, nothing of its programs.
    "gateway": ("api", "console", "contracts", "workflows", "activities", "worker", "sim", "tests", "bench"),
    "sim": (*PRODUCT, "tests", "bench"),
}


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """Every module a file imports, at any depth (functions, `if TYPE_CHECKING`, passed-through blocks)."""
    tree = parse(path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's own package
                package = path.relative_to(root).parent.parts
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # Each name as `module.name`: `from pkg import x` may name a submodule (`from .. import x` always
            # does), and a name a package exports is judged as the package's own.
            found += [(node.lineno, (f"{module}.{a.name}" if a.name != "*" else module).lstrip("."))
                      for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            found.append((node.lineno, str(node.args[0].value)))
    return sorted(found)


def _module_of(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _under(module: str, names: tuple[str, ...]) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def violations(package: str, root: Path = ROOT) -> list[str]:
    bad = []
    for path in sorted((root / package).rglob("*.py")):
        for line, module in imported_modules(path, root):
            top = module.split(".")[0]
            if top in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(root)}:{line} imports {module}")
    return bad


def domain_modules(root: Path = ROOT) -> list[Path]:
    return sorted((root / "wingsmith" / "domain").rglob("*.py"))


def test_every_module_of_wingsmith_lives_in_a_folder_that_says_what_it_is() -> None:
    loose = [_module_of(p, ROOT) for p in sorted((ROOT / "wingsmith").rglob("*.py"))
             if not _under(_module_of(p, ROOT), (*DOMAIN, *ADAPTERS, *ENTRY_POINTS)) and p.name != "__init__.py"]
    assert loose == []
    assert sorted(p.name for p in (ROOT / "wingsmith").iterdir() if p.suffix == ".py") == ["__init__.py"]


def test_adapters_import_no_entry_point() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line} imports {module}"
           for p in sorted((ROOT / "wingsmith" / "adapters").rglob("*.py"))
           for line, module in imported_modules(p) if _under(module, ENTRY_POINTS)]
    assert bad == []


def impurities(paths: list[Path], allowed_wingsmith: tuple[str, ...], root: Path = ROOT) -> list[str]:
    """Imports of an I/O library, or of a wingsmith module outside `allowed_wingsmith` (the domain)."""
    bad = []
    for path in paths:
        for line, module in imported_modules(path, root):
            if _under(module, IO_LIBRARIES) or (module.startswith("wingsmith") and module != "wingsmith"
                                                and not _under(module, allowed_wingsmith)):
                bad.append(f"{path.relative_to(root)}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    assert violations(package) == []


def test_the_domain_imports_no_io_and_no_adapter() -> None:
    assert impurities(domain_modules(), DOMAIN) == []


# File and process I/O a module can do without importing an I/O library: calls of these, however the module
# spells them (`import os as o`, `from os import replace`), and any call of a method named below, on whatever
# receiver (Path and friends; no pure type has such a method). `os.environ`/`os.getenv` are not I/O here:
# settings are read from the environment.
IO_CALLS = ("open", "os.open", "os.fdopen", "os.replace", "os.rename", "os.renames", "os.remove",
            "os.unlink", "os.mkdir", "os.makedirs", "os.rmdir", "os.removedirs", "os.listdir", "os.scandir",
            "os.walk", "os.fwalk", "os.stat", "os.lstat", "os.chmod", "os.chown", "os.link", "os.symlink",
            "os.readlink", "os.truncate", "os.utime", "os.mkfifo", "os.read", "os.write", "os.pipe", "os.system",
            "os.popen", "os.fork", "os.kill", "os.killpg", "os.path.exists", "os.path.lexists", "os.path.isfile",
            "os.path.isdir", "os.path.islink", "os.path.getsize", "os.path.getmtime", "os.path.getatime",
            "os.path.getctime", "os.path.realpath", "os.path.samefile")
IO_CALL_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn", "shutil.", "subprocess.", "tempfile.", "glob.",
                    "fileinput.", "socket.", "io.open", "codecs.open")
IO_METHODS = ("read_text", "read_bytes", "write_text", "write_bytes", "open", "mkdir", "rmdir", "unlink", "touch",
              "iterdir", "glob", "rglob", "exists", "is_file", "is_dir", "is_symlink", "stat", "lstat", "chmod",
              "symlink_to", "hardlink_to", "samefile", "readlink")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def io_calls(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Where a module reads or writes a file or starts a process itself: a call in IO_CALLS (names resolved
    through the module's own imports), or of a method in IO_METHODS (`Path(p).read_text()`, `p.mkdir()`)."""
    bad: list[tuple[str, int, str]] = []
    for path in paths:
        tree = parse(path)
        alias: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                alias |= {(a.asname or a.name.split(".")[0]): (a.name if a.asname else a.name.split(".")[0])
                          for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                alias |= {(a.asname or a.name): f"{node.module}.{a.name}" for a in node.names}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            if name:
                head, _, rest = name.partition(".")
                name = ".".join(filter(None, (alias.get(head, head), rest)))
            method = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name and (name in IO_CALLS or name.startswith(IO_CALL_PREFIXES)):
                bad.append((str(path.relative_to(root)), node.lineno, name))
            elif method in IO_METHODS:
                bad.append((str(path.relative_to(root)), node.lineno, f".{method}()"))
    return [f"{where}:{line} calls {what}" for where, line, what in sorted(bad)]


def test_the_domain_contracts_and_workflows_read_no_file_and_start_no_process() -> None:
    assert io_calls(domain_modules()) == []
    assert io_calls(sorted((ROOT / "contracts").rglob("*.py")) + sorted((ROOT / "workflows").rglob("*.py"))) == []


def test_the_io_rule_sees_file_and_process_calls(tmp_path: Path) -> None:
    """The scanner itself: file and process calls however spelled are found; pure look-alikes are not."""
    (tmp_path / "wingsmith").mkdir()
    (tmp_path / "wingsmith" / "probe.py").write_text(
        "import os\nimport os.path as osp\nimport subprocess as sp\nfrom os import replace as swap\n"
        "from pathlib import Path, PurePosixPath\n"
        "def f(p):\n"
        "    text = Path(p).read_text()\n"
        "    with open(p) as fh:\n        fh.read()\n"
        "    os.replace(p, p + '.old')\n"
        "    swap(p, p)\n"
        "    if osp.exists(p):\n        sp.run(['ls'])\n"
        "    for q in Path(p).parent.glob('*.yaml'):\n        q.write_bytes(b'')\n"
        "    return text.replace('a', 'b'), PurePosixPath(p).stem, os.environ.get('X'), os.path.join(p, 'x')\n")
    assert io_calls([tmp_path / "wingsmith" / "probe.py"], tmp_path) == [
        "wingsmith/probe.py:7 calls .read_text()", "wingsmith/probe.py:8 calls open",
        "wingsmith/probe.py:10 calls os.replace", "wingsmith/probe.py:11 calls os.replace",
        "wingsmith/probe.py:12 calls os.path.exists", "wingsmith/probe.py:13 calls subprocess.run",
        "wingsmith/probe.py:14 calls .glob()", "wingsmith/probe.py:15 calls .write_bytes()"]


def test_contracts_import_only_the_domain() -> None:
    assert impurities(sorted((ROOT / "contracts").rglob("*.py")), DOMAIN) == []


def test_workflows_import_only_contracts_domain_and_temporalio() -> None:
    assert impurities(sorted((ROOT / "workflows").rglob("*.py")), DOMAIN) == []


def test_a_workflow_imports_no_other_workflow() -> None:
    """Workflows start, signal and query each other by the names in contracts/, so none loads another's
    code: a workflow module imports only its own package's modules and the shared policies, history and
    children helpers."""
    shared = ("workflows.policies", "workflows.history", "workflows.children")
    bad = []
    for path in sorted((ROOT / "workflows").rglob("*.py")):
        own = _module_of(path, ROOT) if path.name == "__init__.py" else _module_of(path.parent / "__init__.py", ROOT)
        allowed = shared if own == "workflows" else (*shared, own)
        for line, module in imported_modules(path):
            if _under(module, ("workflows",)) and not _under(module, allowed):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert bad == []


def route_calls(root: Path = ROOT) -> list[str]:
    """Where a route module imports another route module, or a console page or a service imports a route
    module: the routes are thin over the services (api/services/), which the console calls too, so no route
    is anybody's library (issue #49)."""
    bad = []
    for path in sorted([*(root / "api").rglob("*.py"), *(root / "console").rglob("*.py")]):
        own = _module_of(path, root)
        if not _under(own, ("api.routes", "console", "api.services")):
            continue
        for line, module in imported_modules(path, root):
            if _under(module, ("api.routes",)) and not _under(module, (own,)):
                bad.append(f"{path.relative_to(root)}:{line} imports {module}")
    return bad


def test_no_route_is_called_by_another_route_a_console_page_or_a_service() -> None:
    assert route_calls() == []


def test_the_route_rule_sees_each_way_of_calling_a_route(tmp_path: Path) -> None:
    for folder in ("api/routes", "console", "api/services"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "api" / "routes" / "workloads.py").write_text(
        "from api.routes.clusters import DryRunRequest, dry_run\nfrom api.services import planning\n"
        "from api.routes.workloads import helper\n")
    (tmp_path / "console" / "pages.py").write_text(
        "from api.routes import artifacts as artifacts_api\n\ndef f():\n    from api.routes.resolve import x\n")
    (tmp_path / "api" / "services" / "planning.py").write_text("import api.routes.clusters\n")
    assert route_calls(tmp_path) == ["api/routes/workloads.py:1 imports api.routes.clusters.DryRunRequest",
                                     "api/routes/workloads.py:1 imports api.routes.clusters.dry_run",
                                     "api/services/planning.py:1 imports api.routes.clusters",
                                     "console/pages.py:1 imports api.routes.artifacts",
                                     "console/pages.py:4 imports api.routes.resolve.x"]


# What makes an activity's timeouts and retries: only workflows/policies.py (each with why it is so) builds them.
_ACTIVITY_TIMEOUTS = ("start_to_close_timeout", "schedule_to_close_timeout", "schedule_to_start_timeout",
                      "heartbeat_timeout")


def own_policies(root: Path = ROOT) -> list[str]:
    """Where a workflow module other than workflows/policies.py builds a `RetryPolicy(...)` or an activity
    config: a keyword argument, a dict key or an item named after an activity timeout."""
    bad: list[tuple[str, int, str]] = []
    for path in sorted((root / "workflows").rglob("*.py")):
        where = str(path.relative_to(root))
        if where == "workflows/policies.py":
            continue
        for node in ast.walk(parse(path, where)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == \
                    "RetryPolicy":
                bad.append((where, node.lineno, "RetryPolicy("))
            elif isinstance(node, ast.keyword) and node.arg in _ACTIVITY_TIMEOUTS:
                bad.append((where, node.value.lineno, f"{node.arg}="))
            elif isinstance(node, ast.Constant) and node.value in _ACTIVITY_TIMEOUTS:
                bad.append((where, node.lineno, repr(node.value)))
    return [f"{where}:{line} {what}" for where, line, what in sorted(bad)]


def test_only_the_policies_module_sets_activity_timeouts_and_retries() -> None:
    assert own_policies() == []


def test_the_policy_rule_sees_a_workflow_s_own_config(tmp_path: Path) -> None:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "policies.py").write_text(
        "X = ActivityConfig(start_to_close_timeout=1, retry_policy=RetryPolicy())\n")
    (tmp_path / "workflows" / "probe.py").write_text(
        "from temporalio import common, workflow\n"
        "A = workflow.ActivityConfig(task_queue='q', schedule_to_close_timeout=T,\n"
        "                            retry_policy=common.RetryPolicy(maximum_attempts=2))\n"
        "B = {'start_to_close_timeout': T}\n"
        "A['heartbeat_timeout'] = T\n"
        "async def f():\n    await workflow.execute_activity('x', schedule_to_start_timeout=T)\n")
    assert own_policies(tmp_path) == ["workflows/probe.py:2 schedule_to_close_timeout=",
                                      "workflows/probe.py:3 RetryPolicy(",
                                      "workflows/probe.py:4 'start_to_close_timeout'",
                                      "workflows/probe.py:5 'heartbeat_timeout'",
                                      "workflows/probe.py:7 schedule_to_start_timeout="]


def _loaded_by(modules: list[str], tmp_path: Path) -> list[str]:
    """The modules that importing `modules` loads, beyond what temporalio's workflow API and pydantic load
    themselves: what a process (or a workflow sandbox) really gets, at any depth."""
    code = ("import importlib, json, sys\nimport pydantic, temporalio.workflow, temporalio.common\n"
            "before = set(sys.modules)\n"
            f"for m in {modules!r}:\n    importlib.import_module(m)\n"
            "print(json.dumps(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PATH": "/usr/bin:/bin", "WINGSMITH_HOME": str(tmp_path)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def _modules_under(package: str) -> list[str]:
    return [_module_of(p, ROOT) for p in sorted((ROOT / package).rglob("*.py"))]


def test_workflows_load_no_activity_adapter_or_io_library_at_any_depth(tmp_path: Path) -> None:
    """Importing every workflow module loads no activity, no I/O library and no wingsmith module outside the
    domain (only the domain's parent packages), also through the modules it imports in turn."""
    domain_parents = {"wingsmith"}
    # prometheus_client's package loads its exposition module whatever one takes from it (the domain takes
    # its text parser, wingsmith.domain.gateway.traffic); importing it directly is still refused above.
    io = tuple(m for m in IO_LIBRARIES if m != "prometheus_client.exposition")
    loaded = _loaded_by(_modules_under("workflows"), tmp_path)
    bad = [m for m in loaded if _under(m, (*io, "activities", "api", "console", "gateway", "worker", "sim"))
           or (_under(m, ("wingsmith",)) and m not in domain_parents and not _under(m, DOMAIN))]
    assert bad == []


def test_activities_load_no_workflow(tmp_path: Path) -> None:
    assert [m for m in _loaded_by(_modules_under("activities"), tmp_path) if _under(m, ("workflows",))] == []


def test_the_api_process_loads_no_workflow_activity_or_kubernetes(tmp_path: Path) -> None:
    """What the API process really imports (transitively), not what its files say."""
    code = ("import sys\nfrom api.app import create_app\nfrom wingsmith.domain.config import Settings\n"
            "create_app(Settings())\nimport json\nprint(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PATH": "/usr/bin:/bin", "WINGSMITH_HOME": str(tmp_path)})
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if _under(m, ("kubernetes", "activities", "workflows", "worker"))] == []


def test_the_rule_sees_imports_inside_functions(tmp_path: Path) -> None:
    """The scanner itself: an import hidden in a function body or a dynamic import is still found."""
    (tmp_path / "wingsmith" / "local").mkdir(parents=True)
    (tmp_path / "wingsmith" / "local" / "probe.py").write_text(
        "from ..config import Settings\n\ndef f():\n    from workflows.workload import X\n"
        "    import importlib\n    importlib.import_module('api.app')\n    from ... import sim\n")
    assert violations("wingsmith", tmp_path) == ["wingsmith/local/probe.py:4 imports workflows.workload.X",
                                                 "wingsmith/local/probe.py:6 imports api.app",
                                                 "wingsmith/local/probe.py:7 imports sim"]


def test_the_api_reaches_the_console_only_to_serve_its_pages() -> None:
    """The console calls the API's services; the API imports the console in one place, to put its pages on
    the map, so the two rooms do not grow into each other."""
    bad = [f"{p.relative_to(ROOT)}:{line} imports {module}" for p in sorted((ROOT / "api").rglob("*.py"))
           for line, module in imported_modules(p)
           if _under(module, ("console",)) and p.relative_to(ROOT).as_posix() != "api/routes/console.py"]
    assert bad == []
