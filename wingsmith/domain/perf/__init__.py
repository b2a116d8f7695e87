"""Planning by load: what a model delivers on a card (throughput per GPU and per user, TTFT, TPOT),
aggregated against disaggregated, as NVIDIA's AIConfigurator predicts it, and the configuration and
replicas a traffic target needs.

The models and the arithmetic (`estimates`, `cards`, `traffic`), shared with contracts and workflows;
running AIConfigurator itself is wingsmith/adapters/perf/, loaded only by the perf worker. See
docs/planning-by-load.md.
"""
