"""The full resolve answer: the Hub's facts about an artifact, plus the recipe evidence for its model
and the plane's sizing of each variant (the same content a draft carries). Pure apart from a small
memo: a (repo, sha) proposal never changes for one catalog, so the join is computed once."""

from __future__ import annotations

import threading
from collections import OrderedDict

from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.drafts import build_draft_content
from wingsmith.domain.hub.proposal import ArtifactProposal
from wingsmith.domain.recipes import evidence_for

_MEMO: OrderedDict[tuple[str, str, str], ArtifactProposal] = OrderedDict()
_LOCK = threading.Lock()
_MAX = 512


def with_evidence_and_sizing(proposal: ArtifactProposal) -> ArtifactProposal:
    catalog = load_catalog()
    key = (proposal.repo_id.lower(), proposal.sha, catalog.version)
    with _LOCK:
        if key in _MEMO:
            _MEMO.move_to_end(key)
            return _MEMO[key]
    match = catalog.find(proposal.repo_id)
    evidence = evidence_for(match, catalog) if match else None
    # Variants in other repos are derived from parameters here; the draft resolves them for real.
    content = build_draft_content(proposal, evidence)
    enriched = proposal.model_copy(update={
        "evidence": evidence.model_dump(mode="json") if evidence else None,
        "sizing": content.model_dump(mode="json", include={"target", "sizing", "warnings"})})
    with _LOCK:
        _MEMO[key] = enriched
        while len(_MEMO) > _MAX:
            _MEMO.popitem(last=False)
    return enriched
