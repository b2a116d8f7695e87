"""The names and plain words the console puts next to the recipe's raw ids. The plane's catalog keeps
facts only (ids, flags, numbers), so the words a person reads live here, one table per kind of id."""

from __future__ import annotations

from wingsmith.domain.hardware import HARDWARE
from wingsmith.domain.recipes.rules import EXCLUSIVE_FEATURES

# The layouts' display names as the vLLM recipes name their strategies (strategies/*.yaml).
LAYOUT_NAMES = {
    "single_node_tp": "Tensor Parallel",
    "single_node_tep": "Tensor + Expert Parallel",
    "single_node_dep": "Data + Expert Parallel",
    "multi_node_tp": "Multi-Node Tensor Parallel",
    "multi_node_tep": "Multi-Node Tensor + Expert Parallel",
    "multi_node_dep": "Multi-Node Data + Expert Parallel",
    "multi_node_tp_pp": "Multi-Node TP + Pipeline Parallel",
    "multi_node_tp_dp": "Multi-Node TP + Data Parallel",
    "pd_cluster": "Prefill/Decode Disaggregation",
}

# What each feature does, by the feature ids the recipes use; the flags themselves come from the recipe.
FEATURE_WORDS = {
    "tool_calling": "Lets clients pass tools: the server turns the model's tool calls into OpenAI tool_calls "
                    "with the recipe's tool-call parser, and lets the model choose when to call one.",
    "reasoning": "Returns the model's reasoning separately from its final answer (reasoning_content), "
                 "using the recipe's reasoning parser.",
    "spec_decoding": "Speculative decoding: a small draft model (or the model's own extra heads) proposes "
                     "several tokens that the model checks in one step, for lower latency per request.",
    "text_only": "Skips loading the vision encoder, for text-only traffic; the memory it frees goes to the KV "
                 "cache.",
    "encoder_parallel": "Runs the vision encoder data-parallel (a copy per GPU) instead of sliced across GPUs, "
                        "which avoids communication on a small encoder.",
    "decode_context_parallelism": "Decode context parallelism (DCP): the decode phase's KV cache is split "
                                  "across the tensor-parallel GPUs, for decode-heavy, long-context serving. "
                                  "The DCP size must divide the tensor-parallel size.",
}

# The licence of both recipe sources, as their repositories' LICENSE files state it (see each SOURCE.md of
# the upstream snapshot); the catalog records their repositories and commits.
UPSTREAM_LICENCE = "Apache License 2.0"
UPSTREAM_LICENCE_URL = "https://www.apache.org/licenses/LICENSE-2.0"

# Layout deploy types whose one replica is spread over several machines.
SPANS_NODES = {"multi_node", "pd_cluster"}


def card_name(card: str) -> str:
    """A hardware id's display name (the plane's hardware facts), or the id itself when unknown."""
    hw = HARDWARE.get(card)
    return hw.display_name if hw else card


def layout_name(layout: str) -> str:
    return LAYOUT_NAMES.get(layout, layout.replace("_", " "))


def feature_words(feature: str) -> str | None:
    return FEATURE_WORDS.get(feature)


def mutually_exclusive(feature: str) -> list[str]:
    """Features this one can never be combined with, whether or not this model's recipe offers them
    (upstream states the pair in prose on each side; the plane's rules hold it as a pair)."""
    return sorted({b if a == feature else a for a, b in EXCLUSIVE_FEATURES if feature in (a, b)})
