-- The gateway's counters as the plane samples them (wingsmith/adapters/gateway/traffic_sampler.py), written only by
-- the sampler, which holds a lock so one API replica samples. Differenced when written, so a page reads
-- each interval's increase and adds them up in SQL (wingsmith/adapters/store/traffic_samples.py).

-- The last reading of each gateway replica (one row per replica address): the next one is differenced
-- against it, whichever API replica samples then.
create table traffic_gateway_reads (
    gateway text primary key,
    read_at timestamptz not null
);

-- That reading's cumulative counters, one row per endpoint and backend the gateway counts.
create table traffic_readings (
    gateway  text not null references traffic_gateway_reads (gateway) on delete cascade,
    endpoint text not null,
    backend  text not null,
    counters jsonb not null,
    primary key (gateway, endpoint, backend)
);

-- What each backend counted in each slot of SLOT_SECONDS (aligned to the epoch), every gateway replica's
-- increases since its previous reading added in when written (counter resets already taken as
-- Prometheus' increase() takes them; an increase belongs to the slot its reading ended in). A page
-- reads at most window / slot rows per backend and adds nothing up but a workload's endpoints.
-- Histograms are the buckets' increases, cumulative in `le` like Prometheus' (bounds in *_le, counts at
-- the same positions; both empty when nothing was counted), so they give quantiles as
-- histogram_quantile(sum(increase(...))) does. start_at/end_at: the readings the slot's counts span.
-- Bounded: each write deletes the slots that fell out of the window kept.
create table traffic_slots (
    endpoint      text not null,
    backend       text not null,
    slot_at       timestamptz not null,
    workload_id   text,
    start_at      timestamptz not null,
    end_at        timestamptz not null,
    requests      bigint not null,
    failures      bigint not null,
    cooldowns     bigint not null,
    duration_le   float8[] not null,
    duration      float8[] not null,
    first_byte_le float8[] not null,
    first_byte    float8[] not null,
    primary key (endpoint, backend, slot_at)
);
create index traffic_slots_at_idx on traffic_slots (slot_at);
create index traffic_slots_workload_idx on traffic_slots (workload_id, slot_at);
