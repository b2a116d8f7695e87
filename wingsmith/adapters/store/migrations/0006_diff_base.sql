-- What a draft's diff is taken against: the repository's newest approved artifact when the draft was
-- saved (the one the watch compared the branch with), recorded then, so an approval that comes later
-- does not change what an older draft is said to change. Null: nothing of the repo was approved yet.
alter table drafts add column diff_base text references artifacts (id);

-- Drafts saved before this column: the artifact that was the newest approved one at their save.
update drafts d set diff_base = (
    select a.id from artifacts a join reviews r on r.artifact_id = a.id
    where lower(a.repo_id) = lower((select repo_id from artifacts where id = d.artifact_id))
      and r.decision = 'approve' and r.decided_at <= d.created_at and a.id <> d.artifact_id
    order by r.decided_at desc, a.created_at desc limit 1);
