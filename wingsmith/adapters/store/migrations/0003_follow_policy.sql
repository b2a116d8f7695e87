-- A workload's follow policy once changed after its creation (`PATCH /v1/workloads/{id}/follow`).
-- Kept apart from workloads.spec, which the workload's workflow rewrites from its plan; until a row
-- exists here the plan's `follow` (from the create request, default manual) applies.
create table follow_policies (
    workload_id     text primary key references workloads (id),
    follow          text not null check (follow in ('manual', 'auto')),
    set_by          text not null,
    set_at          timestamptz not null default now()
);
