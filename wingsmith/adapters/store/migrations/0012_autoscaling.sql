-- A workload's autoscaling policy (wingsmith/domain/autoscaling.py), set at creation or by PATCH and removed by
-- PATCH with `"autoscaling": null`. Kept apart from workloads.spec, which the workload's workflow rewrites from
-- its plan, as follow_policies is. Written only by the API (api/services/autoscaling.py).
create table autoscaling_policies (
    workload_id     text primary key,
    policy          jsonb not null,
    set_by          text not null,
    set_at          timestamptz not null default now()
);

-- What each workload's autoscaler decided, with the inputs it decided on and what came of it: the audit a
-- person reads (GET /v1/workloads/{id}/autoscaling, the workload page). Written only by the autoscaler's
-- activity, keyed by its workflow id and tick, so a retried write keeps one row.
create table autoscale_decisions (
    workload_id     text not null,
    source          text not null,                 -- the autoscaler's workflow id
    step            text not null,                 -- its run and tick
    action          text not null check (action in ('scale_out', 'scale_in', 'hold')),
    replicas_from   integer not null,
    replicas_to     integer not null,
    outcome         text not null,                 -- held, scaled, waiting_approval, held_quota, refused, ...
    words           text not null,                 -- the decision in a sentence
    note            text not null default '',      -- what came of it, in words (the quota's numbers, the approver)
    reasons         jsonb not null default '[]'::jsonb,
    inputs          jsonb not null default '{}'::jsonb,
    at              timestamptz not null default now(),
    primary key (source, step)
);
create index autoscale_decisions_workload_idx on autoscale_decisions (workload_id, at desc);
