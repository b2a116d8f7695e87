-- A member cluster's last preflight checklist (wingsmith/domain/member_clusters.py: Preflight): placement leaves a
-- cluster whose last check failed out, saying why; null: never checked (placeable, as before preflights).
alter table clusters add column if not exists preflight jsonb;
