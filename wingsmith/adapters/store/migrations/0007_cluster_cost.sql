-- What a GPU-hour costs on a cluster, in the one currency the organisation counts in. Optional: null means
-- unknown; plans sized from a traffic target then prefer the fewest GPUs (docs/planning-by-load.md, "Prices").
-- Postgres orders NaN above Infinity, so "< Infinity" refuses both.
alter table clusters add column cost_per_gpu_hour double precision
    check (cost_per_gpu_hour >= 0 and cost_per_gpu_hour < 'Infinity'::float8);
