-- Team quotas (wingsmith/domain/quotas.py): GPUs per card (or `*` for every card together) and optionally a
-- budget in cost per hour, set by an admin. No row: the team is not limited, as every team was before quotas.
-- Written only by the API (api/services/quotas.py).
create table team_quotas (
    team            text primary key,
    gpus            jsonb not null default '{}'::jsonb,   -- card id or '*' -> GPUs
    budget_per_hour double precision
        check (budget_per_hour >= 0 and budget_per_hour < 'Infinity'::float8),
    policy          text not null default 'refuse' check (policy in ('refuse')),
    set_by          text not null,
    updated_at      timestamptz not null default now()
);

-- What the API last let each workload hold (a create, a scale, an upgrade to more GPUs per replica), written in
-- the same transaction as the quota check, under the team's advisory lock: two requests of one team are judged
-- one after the other, each seeing what the other was allowed before its workflow records anything. A hold
-- counts until it is HOLD_HOURS old (wingsmith/adapters/store/quotas.py); by then the workflow's own row says it.
-- Written only by the API.
create table quota_holds (
    workload_id      text primary key,
    team             text not null,
    hardware         text not null,
    gpus_per_replica integer not null check (gpus_per_replica >= 0),
    replicas         integer not null check (replicas >= 0),
    held_at          timestamptz not null default now()
);
create index quota_holds_team_idx on quota_holds (team);
