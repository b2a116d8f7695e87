"""The plane's own kubeconfig loader (wingsmith/adapters/kube/kubeconfig.py): a reference in, a checked client
out. Every refusal is typed and not retryable, names the reason, and never echoes the content."""

from __future__ import annotations

import base64
import json
import os

import httpx
import pytest
import pytest_asyncio
import yaml

from api.app import create_app
from api.auth import TokenTable
from sim.kube import SimulatedClusters, default_cluster_specs
from wingsmith.adapters.kube import KubeconfigRef, KubeError, new_api_client, shared_api_client
from wingsmith.adapters.kube.kubeconfig import (
    KubeconfigPolicy,
    KubeSecrets,
    canonical,
    load_kubeconfig,
    parse_source,
)
from wingsmith.domain.config import Settings

SECRET = "s3cr3t-token-never-echoed"


def config(user: dict | None = None, cluster: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": cluster or {"server": "http://127.0.0.1:1"}}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            "users": [{"name": "u", "user": user or {"token": SECRET}}]}


@pytest.fixture
def kdir(tmp_path):
    d = tmp_path / "kubeconfigs"
    d.mkdir()
    return d


def refusal(ref: str, policy: KubeconfigPolicy, context: str | None = None) -> KubeError:
    with pytest.raises(KubeError) as err:
        load_kubeconfig(ref, context, policy)
    assert not err.value.retryable and SECRET not in err.value.message
    return err.value


@pytest.mark.parametrize(("ref", "canon"), [
    ("/etc/k/east.yaml", "file:/etc/k/east.yaml"), ("file:/etc/k//east.yaml", "file:/etc/k/east.yaml"),
    ("env:KUBECONFIG_EAST", "env:KUBECONFIG_EAST"), ("secret:plane/east", "secret:plane/east"),
    ("secret:plane/east#kubeconfig", "secret:plane/east"), ("secret:plane/east#value", "secret:plane/east#value"),
])
def test_references_have_one_spelling(ref, canon):
    assert parse_source(ref).text() == canon and canonical(ref) == canon


@pytest.mark.parametrize(("ref", "kind"), [
    ("/a/x:/a/evil.yaml", "KubeconfigPathList"), ("file:/a/x:/a/evil.yaml", "KubeconfigPathList"),
    ("/a/x,/a/y", "KubeconfigPathList"), ("file:kube/east", "KubeconfigPathNotAbsolute"),
    ("file:/a/../etc/shadow", "KubeconfigPathNotAbsolute"), ("kube/east", "KubeconfigReferenceInvalid"),
    ("~/.kube/config", "KubeconfigReferenceInvalid"), ("env:DATABASE_URL", "KubeconfigReferenceInvalid"),
    ("env:KUBECONFIG", "KubeconfigReferenceInvalid"), ("env:kubeconfig_east", "KubeconfigReferenceInvalid"),
    ("secret:Plane/east", "KubeconfigReferenceInvalid"), ("secret:east", "KubeconfigReferenceInvalid"),
    ("secret:plane/east#a/b", "KubeconfigReferenceInvalid"), ("http://evil/kubeconfig", "KubeconfigReferenceInvalid"),
])
def test_malformed_references_are_refused_by_syntax(ref, kind):
    with pytest.raises(KubeError) as err:
        parse_source(ref)
    assert err.value.type == kind and not err.value.retryable


def test_a_file_outside_the_directory_is_refused_even_through_a_symlink(kdir, tmp_path):
    policy = KubeconfigPolicy(directory=kdir)
    outside = tmp_path / "outside.yaml"
    outside.write_text(yaml.safe_dump(config()))
    assert refusal(str(outside), policy).type == "KubeconfigOutsideDirectory"
    (kdir / "link.yaml").symlink_to(outside)
    assert refusal(f"file:{kdir}/link.yaml", policy).type == "KubeconfigOutsideDirectory"
    (kdir / "ok.yaml").write_text(yaml.safe_dump(config()))
    loaded, context = load_kubeconfig(f"file:{kdir}/ok.yaml", None, policy)
    assert context == "c" and loaded["users"][0]["user"]["token"] == SECRET
    assert refusal(f"file:{kdir}/absent.yaml", policy).type == "KubeconfigMissing"


@pytest.mark.parametrize(("user", "cluster", "kind"), [
    ({"exec": {"command": "/usr/bin/aws"}}, None, "KubeconfigExecRefused"),
    ({"auth-provider": {"name": "oidc"}}, None, "KubeconfigExecRefused"),
    ({"tokenFile": "/var/run/secrets/token"}, None, "KubeconfigFileReference"),
    ({"client-certificate": "/etc/ssl/c.pem", "client-key": "/etc/ssl/k.pem"}, None, "KubeconfigFileReference"),
    ({"client-key": "relative/key.pem"}, None, "KubeconfigFileReference"),
    (None, {"server": "https://k", "certificate-authority": "/etc/ssl/ca.pem"}, "KubeconfigFileReference"),
])
def test_users_that_run_programs_and_files_outside_the_directory_are_refused(kdir, user, cluster, kind):
    (kdir / "k.yaml").write_text(yaml.safe_dump(config(user, cluster)))
    err = refusal(f"file:{kdir}/k.yaml", KubeconfigPolicy(directory=kdir))
    assert err.type == kind


def test_files_a_kubeconfig_names_inside_the_directory_are_fine(kdir):
    (kdir / "token").write_text("t")
    (kdir / "k.yaml").write_text(yaml.safe_dump(config({"tokenFile": str(kdir / "token")})))
    assert load_kubeconfig(f"file:{kdir}/k.yaml", None, KubeconfigPolicy(directory=kdir))[1] == "c"


@pytest.mark.parametrize(("content", "kind"), [
    (b"x" * (1024 + 1), "KubeconfigTooLarge"), (f"- token: {SECRET}\n".encode(), "KubeconfigInvalid"),
    (f"token: [{SECRET}".encode(), "KubeconfigInvalid"), (b"\xff\xfe", "KubeconfigInvalid"),
    (yaml.safe_dump(config()).encode(), None),
])
def test_content_is_bounded_and_must_be_a_mapping(kdir, content, kind):
    (kdir / "k.yaml").write_bytes(content)
    policy = KubeconfigPolicy(directory=kdir, max_bytes=1024)
    if kind is None:
        assert load_kubeconfig(f"file:{kdir}/k.yaml", None, policy)[1] == "c"
    else:
        assert refusal(f"file:{kdir}/k.yaml", policy).type == kind


def test_an_unknown_context_is_named_not_the_content(kdir):
    (kdir / "k.yaml").write_text(yaml.safe_dump(config()))
    err = refusal(f"file:{kdir}/k.yaml", KubeconfigPolicy(directory=kdir), context="nowhere")
    assert err.type == "KubeconfigInvalid" and "nowhere" in err.message


def test_an_env_reference_carries_the_content_and_the_shared_client_follows_it(monkeypatch, kdir):
    with SimulatedClusters(default_cluster_specs()[:1], home=kdir.parent / "sim", operator_delay=0.1) as sim:
        monkeypatch.setenv("KUBECONFIG_EAST", sim.kubeconfig_path.read_text())
        ref = KubeconfigRef(source="env:KUBECONFIG_EAST", context=sim.names[0])
        first = shared_api_client(ref)
        assert first.call_api is not None and shared_api_client(ref) is first
        from kubernetes import client as k8s
        assert k8s.CoreV1Api(first).list_node().items
        monkeypatch.setenv("KUBECONFIG_EAST", yaml.safe_dump(config({"exec": {"command": "/bin/sh"}})))
        with pytest.raises(KubeError) as err:
            shared_api_client(KubeconfigRef(source="env:KUBECONFIG_EAST"))
        assert err.value.type == "KubeconfigExecRefused"
    monkeypatch.delenv("KUBECONFIG_EAST")
    with pytest.raises(KubeError) as err:
        new_api_client(KubeconfigRef(source="env:KUBECONFIG_EAST"), policy=KubeconfigPolicy(directory=kdir))
    assert err.value.type == "KubeconfigMissing"


def test_a_secret_reference_is_read_with_the_given_api_and_checked(kdir):
    """Against the emulator, which serves Secrets as an API server does; in a plane the reader is the
    worker's own service account (KubeSecrets.in_cluster)."""
    with SimulatedClusters(default_cluster_specs()[:1], home=kdir.parent / "sim", operator_delay=0.1) as sim:
        name = sim.names[0]
        api = sim.api_client(name)
        from kubernetes import client as k8s
        core = k8s.CoreV1Api(api)
        good = sim.kubeconfig_path.read_text()
        core.create_namespaced_secret("default", {"metadata": {"name": "east"}, "data": {
            "kubeconfig": base64.b64encode(good.encode()).decode(),
            "evil": base64.b64encode(yaml.safe_dump(config({"exec": {"command": "/bin/sh"}})).encode()).decode()}})
        policy = KubeconfigPolicy(directory=kdir)
        client = new_api_client(KubeconfigRef(source="secret:default/east", context=name), policy=policy,
                                secrets=KubeSecrets(api))
        assert k8s.CoreV1Api(client).list_node().items
        for ref, kind in (("secret:default/east#evil", "KubeconfigExecRefused"),
                          ("secret:default/east#absent", "KubeconfigMissing"), ("secret:default/none", "NotFound")):
            with pytest.raises(KubeError) as err:
                new_api_client(KubeconfigRef(source=ref), policy=policy, secrets=KubeSecrets(api))
            assert err.value.type == kind and not err.value.retryable
    # Not in a pod: a secret: reference says so instead of guessing credentials.
    with pytest.raises(KubeError) as err:
        new_api_client(KubeconfigRef(source="secret:default/east"), policy=policy)
    assert err.value.type == "KubeconfigSecretUnavailable"


# --- the API: syntax always, content when it is readable here ---------------------------------------

TOKENS = {"tok-admin": {"name": "ada", "roles": ["admin"]}}
ADMIN = {"Authorization": "Bearer tok-admin"}


@pytest_asyncio.fixture(loop_scope="session")
async def api(pg_pool, kdir):
    settings = Settings(home=kdir.parent / "home", auth_tokens=json.dumps(TOKENS), log_format="json",
                        kubeconfig_dir=kdir)
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


def write(path, content: dict) -> str:
    path.write_text(yaml.safe_dump(content))
    return str(path)


async def test_registration_refuses_each_reason_with_its_code(api, kdir, tmp_path, monkeypatch, pg_pool):
    outside = write(tmp_path / "outside.yaml", config())
    exec_file = write(kdir / "exec.yaml", config({"exec": {"command": "/tmp/evil"}}))
    ca_file = write(kdir / "ca.yaml", config(cluster={"server": "https://k", "certificate-authority": "/etc/ca"}))
    monkeypatch.setenv("KUBECONFIG_EVIL", yaml.safe_dump(config({"auth-provider": {"name": "gcp"}})))
    cases = [(f"{kdir}/a.yaml:{kdir}/b.yaml", "kubeconfig_path_list"), ("file:a.yaml", "kubeconfig_path_not_absolute"),
             (f"file:{kdir}/../x", "kubeconfig_path_not_absolute"), (outside, "kubeconfig_outside_directory"),
             (exec_file, "kubeconfig_exec_refused"), (ca_file, "kubeconfig_file_reference"),
             ("env:KUBECONFIG_EVIL", "kubeconfig_exec_refused"), ("env:HOME", "kubeconfig_reference_invalid"),
             ("secret:x/", "kubeconfig_reference_invalid")]
    for ref, code in cases:
        r = await api.post("/v1/clusters", json={"name": "refused", "kubeconfig": ref}, headers=ADMIN)
        assert r.status_code == 422, (ref, r.text)
        assert r.json()["error"]["code"] == code and r.json()["error"]["details"] == {"field": "kubeconfig"}, ref
        assert SECRET not in r.text
    assert await pg_pool.fetchval("select count(*) from clusters where name = 'refused'") == 0

    # Accepted: a file here or elsewhere in the directory (a bare path is stored as file:), a variable
    # or a Secret only the worker can read.
    ok = write(kdir / "ok.yaml", config())
    for name, ref, stored in (("a", ok, f"file:{ok}"), ("b", f"file:{kdir}/on-the-worker.yaml", None),
                              ("c", "env:KUBECONFIG_ON_THE_WORKER", None), ("d", "secret:plane/east#cfg", None)):
        r = await api.post("/v1/clusters", json={"name": name, "kubeconfig": ref}, headers=ADMIN)
        assert r.status_code == 201, r.text
        assert r.json()["kubeconfig"] == (stored or ref)
        assert SECRET not in r.text
    assert (await api.post("/v1/clusters", json={"name": "a", "kubeconfig": f"file:{ok}"},
                           headers=ADMIN)).status_code == 200  # the same reference, spelled canonically
    await pg_pool.execute("delete from clusters")
    assert os.environ.get("KUBECONFIG_ON_THE_WORKER") is None
