-- Upgrades: a workload may run two versions on one cluster while it moves from one to the other.
-- Each version (revision) is its own DGD and its own deployment row; rows made before upgrades
-- existed are revision 0, the name they always had.
alter table deployments add column revision integer not null default 0;
alter table deployments drop constraint deployments_pkey;
alter table deployments add primary key (workload_id, cluster, revision);

-- While an upgrade shifts traffic on a cluster: `percent` of the workload's traffic there goes to
-- `revision`, the rest to its other revision (instead of weights that follow replicas).
create table traffic_splits (
    workload_id     text not null references workloads (id),
    cluster         text not null,
    revision        integer not null,
    percent         integer not null check (percent between 0 and 100),
    updated_at      timestamptz not null default now(),
    primary key (workload_id, cluster)
);
