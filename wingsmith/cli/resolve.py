"""`wingsmith resolve <source> [--json]`: the artifact proposal for a Hugging Face model, as the API
gives it, from the Hub the plane uses (an `--offline-hub` plane's snapshot server; see
wingsmith/cli/plane.py). Writes nothing but the Hub file cache."""

from __future__ import annotations

import sys

from wingsmith.cli.api_client import pairs
from wingsmith.cli.evidence import evidence_rows, recipe_rows, sizing_rows
from wingsmith.domain.hub import ArtifactProposal

EXIT_CODES = {"InvalidSource": 2, "RepoNotFound": 3, "RevisionNotFound": 3, "GatedRepo": 4, "MissingConfig": 2}


def register(sub) -> None:
    p = sub.add_parser("resolve", help="propose an artifact from a Hugging Face model (writes nothing)")
    p.add_argument("source",
                   help="hf:<org>/<name>[@rev], https://huggingface.co/<org>/<name>[/tree/<rev>] or <org>/<name>")
    p.add_argument("--json", action="store_true", help="print the full proposal as JSON")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from wingsmith.adapters.hub.resolver import Resolver
    from wingsmith.adapters.logs import configure_logging
    from wingsmith.adapters.proposals import with_evidence_and_sizing
    from wingsmith.cli.plane import hub_endpoint
    from wingsmith.domain.config import get_settings
    from wingsmith.domain.hub import HubError, InvalidSource

    settings = get_settings()
    configure_logging("WARNING", settings.log_format)
    resolver = Resolver(hub_endpoint(settings), settings.hf_token_ref, settings.home_dir / "hf-cache")
    try:
        proposal = with_evidence_and_sizing(resolver.resolve(args.source))
    except (InvalidSource, HubError) as exc:
        print(f"wingsmith resolve: {exc}", file=sys.stderr)
        return EXIT_CODES.get(type(exc).__name__, 1)
    print(proposal.model_dump_json(indent=2) if args.json else render(proposal))
    return 0


def _gb(n: int | None) -> str:
    return "unknown" if n is None else f"{n:,} bytes ({n / 1e9:,.1f} GB)"


def render(p: ArtifactProposal) -> str:
    lic = p.license.id or "unknown"
    if p.license.name or p.license.link:
        lic += f" ({', '.join(x for x in (p.license.name, p.license.link) if x)})"
    quant = "none"
    if p.quantization:
        q = p.quantization
        quant = " ".join(str(x) for x in (q.method, q.format, f"{q.bits}-bit" if q.bits else None,
                                          f"group {q.group_size}" if q.group_size else None,
                                          f"block {q.block_size}" if q.block_size else None) if x)
        if q.high_precision:
            quant += f"; high precision: {', '.join(q.high_precision)}"
    arch = p.architecture or "unknown"
    if p.wrapper:
        arch += f" (inside {p.wrapper.architecture})"
    ignored = f", {len(p.files.ignored_weight_files)} duplicates ignored" if p.files.ignored_weight_files else ""
    rows = [
        ("model", f"{p.repo_id}@{p.revision}"), ("commit", p.sha), ("licence", lic),
        ("gated", f"yes ({p.gated_mode})" if p.gated else "no"), ("private", "yes" if p.private else "no"),
        ("task", p.pipeline_tag or "unknown"), ("library", p.library or "unknown"),
        ("architecture", f"{arch}, model_type {p.model_type}"), ("dtype", p.dtype or "unknown"),
        ("quantization", quant),
        ("weights", f"{_gb(p.weight_bytes)} from {p.weight_bytes_source or 'no source'}"),
        ("parameters", f"{p.parameters.total:,} ({p.parameters.source})" if p.parameters.total else "unknown"),
        ("context", f"{p.context_length:,} tokens" if p.context_length else "unknown"),
        ("files", f"{p.files.count} files, {p.files.weight_file_count} weight files" + ignored),
    ]
    # Then the evidence and the plane's own sizing, as a draft of it would show them (nothing is written).
    sizing = p.sizing or {}
    draft = recipe_rows(p.evidence, p.repo_id) + evidence_rows(p.evidence)
    draft += sizing_rows(sizing, sizing.get("warnings") or [])
    return pairs(rows) + "\n\n" + pairs(draft)
