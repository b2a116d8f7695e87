"""`recipes refresh` against a local server that speaks the two GitHub endpoints it uses."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from wingsmith.adapters.recipes.files import build_catalog, read_catalog
from wingsmith.adapters.recipes.refresh import RefreshFailed, refresh_catalog
from wingsmith.cli.main import build_parser

VLLM_SHA = "1" * 40
VLLM_SHA_2 = "2" * 40
DYNAMO_SHA = "3" * 40


class FakeGitHub:
    """repo -> commit -> {path: bytes}; branch `main` points at the last commit added."""

    def __init__(self):
        self.repos: dict[str, dict[str, dict[str, bytes]]] = {}
        self.heads: dict[str, str] = {}
        self.requests: list[str] = []

    def add(self, repo: str, sha: str, root: Path, prefixes: tuple[str, ...]):
        files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
                 and p.relative_to(root).as_posix().startswith(prefixes)}
        self.repos.setdefault(repo, {})[sha] = files
        self.heads[repo] = sha

    def handler(self):
        gh = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: bytes, kind="application/json"):
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                gh.requests.append(self.path)
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[:1] == ["api"] and parts[1] == "repos":
                    repo = "/".join(parts[2:4])
                    if parts[4:5] == ["commits"] and repo in gh.heads:
                        ref = parts[5]
                        sha = gh.heads[repo] if ref == "main" else ref
                        return self._send(200, json.dumps({"sha": sha}).encode())
                    if parts[4:6] == ["git", "trees"] and parts[6] in gh.repos.get(repo, {}):
                        files = gh.repos[repo][parts[6]]
                        tree = [{"path": p, "type": "blob"} for p in sorted(files)]
                        return self._send(200, json.dumps({"sha": parts[6], "tree": tree, "truncated": False}).encode())
                elif parts[:1] == ["raw"]:
                    repo, sha, path = "/".join(parts[1:3]), parts[3], "/".join(parts[4:])
                    body = gh.repos.get(repo, {}).get(sha, {}).get(path)
                    if body is not None:
                        return self._send(200, body, "text/plain")
                self._send(404, b'{"message":"Not Found"}')

        return Handler


# Where each tree keeps a recipe to change between commits: (file, recipe, its default variant's floor).
MOVING_RECIPE = {"fixtures": ("models/fixture-lab/Omni-Voice-7B.yaml", "fixture-lab/Omni-Voice-7B", 20),
                 "upstream": ("models/openai/gpt-oss-120b.yaml", "openai/gpt-oss-120b", 96)}


@pytest.fixture(params=["fixtures", "upstream"])
def github(request):
    """A fake GitHub serving the project's upstream-shaped fixtures (bare clone) or copies of the full
    upstream trees (upstream tier)."""
    vllm, dynamo = request.getfixturevalue("fixture_trees" if request.param == "fixtures" else "snapshot_copy")
    gh = FakeGitHub()
    gh.add("vllm-project/recipes", VLLM_SHA, vllm, ("models/", "strategies/", "taxonomy.yaml"))
    gh.add("ai-dynamo/dynamo", DYNAMO_SHA, dynamo, ("recipes/",))
    server = ThreadingHTTPServer(("127.0.0.1", 0), gh.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    gh.api, gh.raw, gh.vllm_root, gh.trees = f"{base}/api", f"{base}/raw", vllm, request.param
    gh.local, gh.local_report = build_catalog(vllm, dynamo)  # the same trees imported from disk
    yield gh
    server.shutdown()
    server.server_close()


def test_refresh_writes_a_new_version_pinned_to_the_commit(github, tmp_path, catalog):
    store = tmp_path / "catalogs"
    result = refresh_catalog(store, api_url=github.api, raw_url=github.raw)
    assert result.created
    assert result.vllm_source.commit == VLLM_SHA and result.dynamo_source.commit == DYNAMO_SHA
    stored = read_catalog(Path(result.path))
    assert stored.version == result.version and stored.version.startswith("vllm-111111111111.dynamo-333333333333.")
    assert stored.version != catalog.version
    # Same facts as importing the same trees from disk, under a new stamp.
    assert stored.recipes == github.local.recipes and stored.dynamo == github.local.dynamo
    assert stored.strategies == github.local.strategies and stored.hardware == github.local.hardware
    if github.trees == "upstream":
        assert stored.recipes == catalog.recipes and stored.dynamo == catalog.dynamo  # the shipped facts
        assert result.report.recipes == len(catalog.recipes) == len(list(github.vllm_root.glob("models/*/*.yaml")))
        assert result.report.dynamo_entries == len(catalog.dynamo)
        assert result.report.problems == github.local_report.problems  # the same warnings as from disk
    else:
        files = len(list(github.vllm_root.glob("models/*/*.yaml")))
        assert result.report.recipes == files > 0 and result.report.dynamo_entries == len(github.local.dynamo) > 0
    # Only the files the catalog needs were fetched, each at the pinned commit.
    raw = [r for r in github.requests if r.startswith("/raw/")]
    assert all(f"/{VLLM_SHA}/" in r or f"/{DYNAMO_SHA}/" in r for r in raw)
    assert not any(r.endswith(".md") for r in raw)


def test_refresh_never_edits_existing_versions(github, tmp_path):
    store = tmp_path / "catalogs"
    first = refresh_catalog(store, api_url=github.api, raw_url=github.raw)
    before = Path(first.path).read_bytes()
    again = refresh_catalog(store, api_url=github.api, raw_url=github.raw)
    assert not again.created and again.version == first.version
    # Upstream moves on: a changed recipe at a new commit becomes a new version beside the old one.
    file, recipe, floor = MOVING_RECIPE[github.trees]
    path = github.vllm_root / file
    text = path.read_text()
    assert text.count(f"vram_minimum_gb: {floor}") == 1
    path.write_text(text.replace(f"vram_minimum_gb: {floor}", f"vram_minimum_gb: {floor + 3}"))
    github.add("vllm-project/recipes", VLLM_SHA_2, github.vllm_root, ("models/", "strategies/", "taxonomy.yaml"))
    newer = refresh_catalog(store, api_url=github.api, raw_url=github.raw)
    assert newer.created and newer.version != first.version and newer.vllm_source.commit == VLLM_SHA_2
    assert Path(first.path).read_bytes() == before
    assert read_catalog(Path(first.path)).recipes[recipe].variants["default"].vram_minimum_gb == floor
    assert read_catalog(Path(newer.path)).recipes[recipe].variants["default"].vram_minimum_gb == floor + 3
    assert len(list(store.glob("*.json"))) == 2
    # Pinning to the old commit explicitly fetches exactly the old facts.
    pinned = refresh_catalog(store, vllm_ref=VLLM_SHA, api_url=github.api, raw_url=github.raw)
    assert pinned.version == first.version and not pinned.created


def test_refresh_failures_are_clear_and_store_nothing(github, tmp_path):
    store = tmp_path / "catalogs"
    with pytest.raises(RefreshFailed, match="answered 404"):
        refresh_catalog(store, vllm_ref="f" * 40, api_url=github.api, raw_url=github.raw)
    with pytest.raises(RefreshFailed, match="could not reach"):
        refresh_catalog(store, api_url="http://127.0.0.1:9", raw_url="http://127.0.0.1:9", timeout=2)
    assert not store.exists() or not list(store.glob("*.json"))


def test_refresh_command(github, tmp_path, capsys):
    args = build_parser().parse_args(["recipes", "refresh", "--api-url", github.api, "--raw-url", github.raw,
                                      "--catalog-dir", str(tmp_path / "c")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert f"vLLM recipes @ {VLLM_SHA}" in out and "new catalog version vllm-111111111111" in out
    args = build_parser().parse_args(["recipes", "refresh", "--api-url", "http://127.0.0.1:9",
                                      "--raw-url", "http://127.0.0.1:9", "--catalog-dir", str(tmp_path / "c")])
    assert args.func(args) == 1
    assert "refresh failed" in capsys.readouterr().err
