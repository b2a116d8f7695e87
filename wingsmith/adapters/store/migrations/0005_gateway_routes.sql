-- The route table every gateway replica pulls (docs/production.md, "Several gateways"): one row per
-- endpoint, written only by the endpoint.set_routes activity. A row's version moves only when its
-- routes really change; writers take a lock, so versions commit in order and the largest is the
-- table's version. A removed endpoint keeps its row with routes null: its removal moves the version too.
create sequence gateway_routes_version;

create table gateway_routes (
    model_name  text primary key,
    routes      jsonb,
    version     bigint not null,
    updated_at  timestamptz not null default now()
);
