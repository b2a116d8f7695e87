-- The registry: what exists in the plane, as the workflows' activities record it.
-- One writer per table: workflows write only through activities, keyed by workflow id and step.

create table artifacts (
    id              text primary key,              -- <org>/<name>@<sha>
    repo_id         text not null,
    revision        text not null,                 -- what was asked for (branch, tag or sha)
    sha             text not null,
    state           text not null,                 -- resolving, draft, approved, rejected, expired, superseded, failed
    workflow_id     text not null unique,
    requested_by    text not null,
    proposal        jsonb not null default '{}'::jsonb,
    superseded_by   text references artifacts (id),
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now()
);
create index artifacts_repo_idx on artifacts (lower(repo_id));
create index artifacts_state_idx on artifacts (state);

create table drafts (
    artifact_id     text not null references artifacts (id),
    version         integer not null,
    catalog_version text not null,                 -- drafts keep the catalog they were built from
    evidence        jsonb not null,
    sizing          jsonb not null,
    warnings        jsonb not null default '[]'::jsonb,
    created_at      timestamptz not null default now(),
    primary key (artifact_id, version)
);

create table reviews (
    artifact_id     text not null references artifacts (id),
    draft_version   integer not null,
    decision        text not null,                 -- approve, reject, expire
    reviewer        text not null,
    via             text not null,                 -- api, signal, timer
    comment         text not null default '',
    selections      jsonb not null default '{}'::jsonb,
    decided_at      timestamptz not null,
    primary key (artifact_id)                      -- one decision per artifact
);

create table clusters (
    name            text primary key,
    region          text not null default '',
    labels          jsonb not null default '{}'::jsonb,
    -- How to reach the Kubernetes API: a kubeconfig *reference* (file path, context name), never credentials.
    kubeconfig_ref  text not null default '',
    kube_context    text not null default '',
    frontend_base_url text not null default '',
    cordoned        boolean not null default false,
    manual_inventory jsonb,                        -- for clusters whose nodes carry no GPU labels
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now()
);

create table workloads (
    id              text primary key,
    artifact_id     text not null references artifacts (id),
    spec            jsonb not null,
    state           text not null,
    workflow_id     text not null unique,
    requested_by    text not null,
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now()
);

create table placements (
    workload_id     text not null references workloads (id),
    revision        integer not null,
    decision        jsonb not null,
    created_at      timestamptz not null default now(),
    primary key (workload_id, revision)
);

create table deployments (
    workload_id     text not null references workloads (id),
    cluster         text not null,
    dgd_name        text not null,
    namespace       text not null,
    replicas        integer not null,
    state           text not null,
    frontend_url    text,
    detail          jsonb not null default '{}'::jsonb,
    updated_at      timestamptz not null default now(),
    primary key (workload_id, cluster)
);

create table endpoints (
    name            text primary key,
    workloads       jsonb not null default '[]'::jsonb,
    state           text not null,
    workflow_id     text not null unique,
    routes          jsonb not null default '[]'::jsonb,
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now()
);

-- Audit trail. (source, step) is the idempotency key: a retried activity writes the same row once.
create table events (
    id              bigserial primary key,
    source          text not null,                 -- workflow id, or "api"
    step            text not null,
    subject         text not null,                 -- artifact/workload/endpoint/cluster id
    kind            text not null,
    actor           text not null default 'system',
    detail          jsonb not null default '{}'::jsonb,
    at              timestamptz not null default now(),
    unique (source, step)
);
create index events_subject_idx on events (subject, id);
