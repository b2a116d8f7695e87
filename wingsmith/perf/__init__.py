"""Planning by load: what a model delivers on a card (throughput per GPU and per user, TTFT, TPOT),
aggregated against disaggregated, as NVIDIA's AIConfigurator predicts it, and the configuration and
replicas a traffic target needs.

The models and the arithmetic (`estimates`, `cards`, `traffic`) are pure and shared with contracts and
workflows; `aiconfigurator` (the tool itself, from the optional `perf` extra) and `cache` are adapters
that only the perf worker loads. See docs/planning-by-load.md.
"""
