"""AIConfigurator, run: the tool itself (`aiconfigurator`, from the optional `perf` extra), its answers
cached on disk (`cache`) and the searches taking turns (`turns`). Only the perf worker loads them; the
models and the arithmetic are the domain's (wingsmith/domain/perf/). See docs/planning-by-load.md."""
