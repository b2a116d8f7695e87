-- Teams: workloads and endpoints belong to the team that created them (artifacts, approvals and
-- clusters stay organisation-wide). Rows made before teams existed belong to the default team, the
-- team of every token that names none, so a single-team plane keeps seeing and acting on them.
alter table workloads add column team text not null default 'default';
create index workloads_team_idx on workloads (team, created_at desc);

alter table endpoints add column team text not null default 'default';
alter table endpoints add column requested_by text not null default 'unknown';
create index endpoints_team_idx on endpoints (team, name);

-- Who did what: the team of the principal beside the actor of each event.
alter table events add column team text;
