"""Where AIConfigurator cannot answer, the entry says so in words and nothing is made up; and the tool is
never let onto the network (it would fetch an unknown model's config from huggingface.co by itself)."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from wingsmith.adapters.perf.aiconfigurator import Estimator
from wingsmith.domain.perf.estimates import EstimateRequest


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    tried: list[str] = []

    def refuse(url, *args, **kwargs):
        tried.append(getattr(url, "full_url", str(url)))
        raise OSError("no network in this test")
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    return tried


def test_a_model_the_tool_does_not_ship_without_its_config_is_not_supported(tmp_path: Path,
                                                                            no_network: list[str]) -> None:
    estimate = Estimator(tmp_path).estimate(EstimateRequest(model="acme/never-published-7b", card="h200"))
    assert [e.configuration for e in estimate.entries] == [None, None]
    assert all("does not ship acme/never-published-7b and no config.json was given" in (e.reason or "")
               for e in estimate.entries)
    assert no_network == []


def test_a_config_the_tool_cannot_model_is_said_in_words(tmp_path: Path, no_network: list[str]) -> None:
    config = {"architectures": ["TeapotForCausalLM"], "model_type": "teapot", "hidden_size": 64}
    request = EstimateRequest(model="acme/teapot", model_commit="c" * 40, config=config, card="gb200")
    estimate = Estimator(tmp_path).estimate(request)
    assert [e.mode for e in estimate.entries] == ["agg", "disagg"]
    for entry in estimate.entries:
        assert entry.configuration is None and entry.reason, entry
        assert entry.source is not None and entry.source.database.startswith("gb200 vllm ")
    # Handed over as a directory holding the config, never as a repo id to fetch.
    assert list((tmp_path / "perf-cache" / "models").glob("*/config.json"))
    assert no_network == []
    # The answer is cached like any other: asking again does not run the tool.
    assert Estimator(tmp_path).estimate(request).cached
