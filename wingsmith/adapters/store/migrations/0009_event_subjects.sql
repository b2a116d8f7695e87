-- Events belong to a kind of subject as well as to its name: workload ids and endpoint names are each
-- unique within their kind, not across kinds, so reading "the events of `x`" by name alone mixed a
-- workload's trail with an endpoint's (of another team, even) that carries the same name.
alter table events add column subject_kind text;

-- Who wrote what, by source: an endpoint's workflow writes its endpoint's events, an artifact's workflow
-- those of its own artifact; everything else (workload and rollout workflows, upgrades, follow
-- decisions an artifact's workflow records on workloads, the API's follow settings) is about a workload.
create function events_subject_kind(source text, subject text) returns text language sql immutable as $$
    select case when source like 'endpoint/%' then 'endpoint'
                when source = 'artifact/' || subject then 'artifact'
                else 'workload' end
$$;

update events set subject_kind = events_subject_kind(source, subject);

-- Writers name the kind; a writer that predates this column (an older worker still draining during a
-- rolling upgrade) gets it from the rule above, so no row is ever without one.
create function events_fill_subject_kind() returns trigger language plpgsql as $$
begin
    if new.subject_kind is null then
        new.subject_kind := events_subject_kind(new.source, new.subject);
    end if;
    return new;
end
$$;
create trigger events_fill_subject_kind before insert on events
    for each row execute function events_fill_subject_kind();

alter table events alter column subject_kind set not null;
alter table events add constraint events_subject_kind_known
    check (subject_kind in ('artifact', 'workload', 'endpoint'));
create index events_subject_kind_idx on events (subject_kind, subject, id);
