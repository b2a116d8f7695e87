"""Resolving through the real huggingface_hub client against the offline Hub."""

import logging
import time

import pytest

from sim.hub import load_snapshot
from tests.hub.conftest import TOKEN
from tests.upstream import snapshot_config
from wingsmith.domain.hub import (
    GatedRepo,
    HubError,
    HubRateLimited,
    HubTokenUnavailable,
    HubUnavailable,
    RepoNotFound,
    RevisionNotFound,
)

# The snapshot is checked against upstream's configs and totals in test_snapshot.py (upstream tier);
# here the resolver must give back exactly what the Hub it talks to serves.
SNAP = load_snapshot()["models"]


def _architecture(config):
    inner = config.get("text_config") or config
    return inner["architectures"][0]


@pytest.mark.parametrize("repo_id", sorted(SNAP))
def test_every_shipped_model_resolves(make_resolver, token_env, repo_id):
    p = make_resolver(token_env).resolve(f"hf:{repo_id}")
    assert p.sha == SNAP[repo_id]["sha"]
    assert p.weight_bytes == SNAP[repo_id]["weight_total"] and p.weight_bytes_source == "safetensors_files"
    config = snapshot_config(repo_id)
    assert p.architecture == _architecture(config)
    assert p.config == config
    assert p.context_length and p.license.id and p.files.weight_file_count > 0


def test_kimi_k3(make_resolver):
    p = make_resolver().resolve("https://huggingface.co/moonshotai/Kimi-K3")
    assert p.weight_bytes == 1_560_860_324_864
    assert (p.architecture, p.model_type) == ("KimiLinearForCausalLM", "kimi_linear")
    assert (p.wrapper.architecture, p.wrapper.model_type) == ("KimiK3ForConditionalGeneration", "kimi_k3")
    assert (p.license.id, p.license.name, p.license.link) == ("other", "modified-mit", "LICENSE")
    assert p.quantization.format == "mxfp4-pack-quantized" and p.context_length == 1_048_576
    assert p.parameters.total == 2_779_931_837_184 and p.files.weight_file_count == 96
    assert not p.gated and not p.private


def test_gpt_oss_ignores_original_duplicates(make_resolver):
    p = make_resolver().resolve("openai/gpt-oss-120b")
    assert p.files.ignored_weight_files and all(k.startswith("original/") for k in p.files.ignored_weight_files)
    assert p.weight_bytes == SNAP["openai/gpt-oss-120b"]["weight_total"]
    assert p.files.total_bytes > 2 * p.weight_bytes  # the duplicates are on the Hub, just not counted


def test_index_total_when_the_hub_gives_no_sizes(hub, make_resolver):
    hub.faults.set("Qwen/Qwen3-235B-A22B", hide_file_sizes=True)
    p = make_resolver().resolve("Qwen/Qwen3-235B-A22B")
    assert (p.weight_bytes, p.weight_bytes_source) == (470_187_269_120, "index_total_size")
    assert p.weight_bytes_fallbacks[0].source == "safetensors_files"
    assert any(path.endswith("model.safetensors.index.json") for _m, path in hub.requests)


def test_revision_pinned_by_sha_and_requested_revision_kept(make_resolver):
    r = make_resolver()
    sha = SNAP["Qwen/Qwen3-8B"]["sha"]
    p = r.resolve(f"hf:Qwen/Qwen3-8B@{sha}")
    assert (p.revision, p.sha) == (sha, sha)
    assert r.resolve("hf:Qwen/Qwen3-8B@main").revision == "main"


# -- errors -----------------------------------------------------------------------------------------

def test_unknown_repo(make_resolver):
    with pytest.raises(RepoNotFound, match="no model nobody/nothing") as err:
        make_resolver().resolve("nobody/nothing")
    assert not err.value.retryable


def test_unknown_revision(make_resolver):
    with pytest.raises(RevisionNotFound, match="no revision 'v9'"):
        make_resolver().resolve("hf:Qwen/Qwen3-8B@v9")


def test_missing_revision_fault(hub, make_resolver):
    hub.faults.set("Qwen/Qwen3-8B", missing_revision=True)
    with pytest.raises(RevisionNotFound):
        make_resolver().resolve("Qwen/Qwen3-8B")


def test_gated_without_token_says_how_to_get_access(make_resolver):
    with pytest.raises(GatedRepo) as err:
        make_resolver().resolve("meta-llama/Llama-3.1-8B")
    msg = str(err.value)
    assert "gated" in msg and "https://huggingface.co/meta-llama/Llama-3.1-8B" in msg
    assert "WINGSMITH_HF_TOKEN_REF" in msg


def test_gated_with_a_granted_token_resolves(make_resolver, token_env):
    p = make_resolver(token_env).resolve("meta-llama/Llama-3.3-70B-Instruct")
    assert p.gated and p.gated_mode == "manual" and p.license.id == "llama3.3"


def test_gated_fault_denies_even_a_token(hub, make_resolver, token_env):
    hub.faults.set("Qwen/Qwen3-8B", gated=True)
    with pytest.raises(GatedRepo, match=f"the env var {token_env} does not have access"):
        make_resolver(token_env).resolve("Qwen/Qwen3-8B")


def test_429_then_success_waits_the_advertised_time(hub, make_resolver):
    hub.faults.set("openai/gpt-oss-20b", rate_limited=1, rate_limit_reset=1)
    waits = []
    r = make_resolver(sleep=lambda s: (waits.append(s), time.sleep(s)))
    started = time.monotonic()
    p = r.resolve("openai/gpt-oss-20b")
    assert p.sha == SNAP["openai/gpt-oss-20b"]["sha"]
    assert waits == [1.0] and time.monotonic() - started >= 1.0


def test_429_with_a_long_wait_is_handed_back(hub, make_resolver):
    hub.faults.set("openai/gpt-oss-20b", rate_limited=-1, rate_limit_reset=600)
    before = hub.request_count("openai/gpt-oss-20b")
    with pytest.raises(HubRateLimited, match="retry after 600s") as err:
        make_resolver().resolve("openai/gpt-oss-20b")
    assert err.value.retryable and err.value.retry_after == 600
    assert hub.request_count("openai/gpt-oss-20b") - before == 1


def test_5xx_is_retried_then_succeeds(hub, make_resolver):
    hub.faults.set("Qwen/Qwen3-8B", server_errors=2)
    before = hub.request_count("Qwen/Qwen3-8B")
    assert make_resolver().resolve("Qwen/Qwen3-8B").sha == SNAP["Qwen/Qwen3-8B"]["sha"]
    assert hub.request_count("Qwen/Qwen3-8B") - before == 3 + 2  # 2 failures, info, HEAD + GET config


def test_5xx_forever_becomes_unavailable(hub, make_resolver):
    hub.faults.set("Qwen/Qwen3-8B", server_errors=-1, server_error_status=502)
    before = hub.request_count("Qwen/Qwen3-8B")
    with pytest.raises(HubUnavailable, match="answered 502") as err:
        make_resolver().resolve("Qwen/Qwen3-8B")
    assert err.value.retryable and hub.request_count("Qwen/Qwen3-8B") - before == 3


def test_timeouts_become_unavailable(hub, make_resolver):
    hub.faults.set("Qwen/Qwen3-8B", latency=0.5)
    with pytest.raises(HubUnavailable, match="did not answer within 0.2s"):
        make_resolver(timeout=0.2).resolve("Qwen/Qwen3-8B")


def test_unreachable_hub_is_unavailable(tmp_path):
    from tests.hub.conftest import FAST_RETRY
    from wingsmith.adapters.hub.resolver import Resolver
    with pytest.raises(HubUnavailable, match="cannot connect"):
        Resolver("http://127.0.0.1:9", None, tmp_path, retry=FAST_RETRY, timeout=1).resolve("Qwen/Qwen3-8B")


def test_other_4xx_is_never_retried(hub, make_resolver):
    hub.faults.set("Qwen/Qwen3-8B", server_errors=-1, server_error_status=400)
    before = hub.request_count("Qwen/Qwen3-8B")
    with pytest.raises(HubError, match="refused .* with 400") as err:
        make_resolver().resolve("Qwen/Qwen3-8B")
    assert not err.value.retryable and hub.request_count("Qwen/Qwen3-8B") - before == 1


# -- cache ------------------------------------------------------------------------------------------

def test_repeated_resolve_makes_no_hub_call(hub, make_resolver):
    r = make_resolver()
    first = r.resolve("hf:deepseek-ai/DeepSeek-V3")
    calls = hub.request_count()
    assert r.resolve("hf:deepseek-ai/DeepSeek-V3") == first
    assert r.resolve(f"hf:deepseek-ai/DeepSeek-V3@{first.sha}").sha == first.sha
    assert hub.request_count() == calls


def test_branch_is_cached_briefly_and_commits_forever(hub, make_resolver):
    now = [1000.0]
    r = make_resolver(branch_ttl=30, clock=lambda: now[0])
    repo = "moonshotai/Kimi-K2-Instruct"
    old = r.resolve(repo).sha
    new_sha = "f" * 40
    hub.move_branch(repo, new_sha)
    try:
        now[0] += 10
        assert r.resolve(repo).sha == old           # within the TTL: no Hub call, old answer
        now[0] += 30
        assert r.resolve(repo).sha == new_sha        # expired: asks again, sees the push
        calls = hub.request_count(repo)
        assert r.resolve(f"{repo}@{old}").sha == old  # the old commit's proposal stays cached
        assert hub.request_count(repo) == calls
    finally:
        hub.move_branch(repo, SNAP[repo]["sha"])


# -- token ------------------------------------------------------------------------------------------

def test_token_never_leaks(hub, make_resolver, token_env, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    r = make_resolver(token_env)
    r.resolve("meta-llama/Llama-3.1-8B")
    messages = []
    hub.faults.set("Qwen/Qwen3-8B", server_errors=-1)
    for source in ("Qwen/Qwen3-8B", "nobody/nothing", "hf:openai/gpt-oss-20b@nope"):
        with pytest.raises(HubError) as err:
            r.resolve(source)
        messages.append(str(err.value))
    hub.faults.set("Qwen/Qwen3-235B-A22B", gated=True)
    with pytest.raises(GatedRepo) as err:
        r.resolve("Qwen/Qwen3-235B-A22B")
    messages.append(str(err.value))
    out = capsys.readouterr()
    everything = "\n".join(messages + [caplog.text, out.out, out.err])
    assert caplog.records and TOKEN not in everything


def test_token_from_file(tmp_path, make_resolver):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    assert make_resolver(f"file:{path}").resolve("meta-llama/Llama-3.1-8B").gated


@pytest.mark.parametrize("ref,problem", [
    ("WINGSMITH_TEST_UNSET_VAR", "env var WINGSMITH_TEST_UNSET_VAR named by WINGSMITH_HF_TOKEN_REF is not set"),
    ("file:/nonexistent/token", "cannot read the Hugging Face token file /nonexistent/token"),
    (TOKEN, "not hold the token itself"),
])
def test_bad_token_reference(make_resolver, ref, problem):
    with pytest.raises(HubTokenUnavailable) as err:
        make_resolver(ref).resolve("Qwen/Qwen3-8B")
    assert problem in str(err.value) and TOKEN not in str(err.value)
