"""`wingsmith recipes import|refresh|edit|use|show`: build the catalog from upstream snapshots, fetch a
newer one pinned to a commit, change a recipe locally, choose the version in force, and show a model's
evidence and tested command."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from wingsmith.adapters.recipes.files import SHIPPED_CATALOG, build_catalog, load_catalog, write_catalog
from wingsmith.domain.recipes.command import ServeCommand
from wingsmith.domain.recipes.models import Catalog


def register(subparsers) -> None:
    parser = subparsers.add_parser("recipes", help="the recipe evidence catalog (vLLM and NVIDIA Dynamo recipes)")
    sub = parser.add_subparsers(dest="recipes_command", metavar="ACTION", required=True)

    imp = sub.add_parser("import", help="build the catalog from local upstream snapshots")
    imp.add_argument("--vllm", required=True, type=Path,
                     help="vLLM recipes snapshot (models/, strategies/, taxonomy.yaml)")
    imp.add_argument("--dynamo", required=True, type=Path,
                     help="NVIDIA Dynamo snapshot (every recipes/**/*.yaml holding a DynamoGraphDeployment)")
    imp.add_argument("--out", "--catalog", dest="out", type=Path, default=SHIPPED_CATALOG,
                     help="where to write (default: the shipped catalog)")
    imp.add_argument("--strict", action="store_true", help="exit 1 if any file or part could not be used")
    imp.set_defaults(func=_import)

    ref = sub.add_parser("refresh", help="fetch newer upstream snapshots (pinned to a commit) as a new catalog version")
    ref.add_argument("--vllm-ref", default="main", help="branch, tag or commit of vllm-project/recipes")
    ref.add_argument("--dynamo-ref", default="main", help="branch, tag or commit of ai-dynamo/dynamo")
    ref.add_argument("--api-url", default=None, help="GitHub REST API base URL (default https://api.github.com)")
    ref.add_argument("--raw-url", default=None, help="raw file host (default https://raw.githubusercontent.com)")
    ref.add_argument("--catalog-dir", type=Path, default=None, help="where catalog versions are kept "
                     "(default: <WINGSMITH_HOME>/catalogs)")
    ref.set_defaults(func=_refresh)

    edit = sub.add_parser("edit", help="a local recipe change, put in force as a new catalog version (for trying "
                          "the watch's catalog trigger offline)")
    edit.add_argument("model", help="Hugging Face id whose recipe to change, e.g. openai/gpt-oss-20b")
    edit.add_argument("--set", dest="changes", action="append", required=True, metavar="KEY=VALUE",
                      help="a recipe field (dotted, as `recipes show --json` names them under the catalog's recipe, "
                           "e.g. variants.default.vram_minimum_gb=48 or base_args='[\"--max-num-seqs\",\"64\"]'); "
                           "the value is read as JSON if it parses (repeatable)")
    edit.add_argument("--catalog-dir", type=Path, default=None, help="where catalog versions are kept "
                      "(default: <WINGSMITH_HOME>/catalogs)")
    edit.set_defaults(func=_edit)

    use = sub.add_parser("use", help="put a stored catalog version (or `shipped`) in force for new drafts")
    use.add_argument("version", help="a version under the catalog dir, or `shipped`")
    use.add_argument("--catalog-dir", type=Path, default=None, help="(default: <WINGSMITH_HOME>/catalogs)")
    use.set_defaults(func=_use)

    show = sub.add_parser("show", help="a model's recipe evidence, and the serve command for a choice")
    show.add_argument("model", help="Hugging Face id, e.g. moonshotai/Kimi-K3 or RedHatAI/Kimi-K3-NVFP4")
    show.add_argument("--hardware", help="hardware id (e.g. b300) to print the serve command for")
    show.add_argument("--layout", help="layout (default: the recipe's default)")
    show.add_argument("--variant", help="variant (default: the one the id matched)")
    show.add_argument("--feature", action="append", default=[], help="enable a feature (name or name:mode); "
                      "-name turns off a default one. Repeatable.")
    show.add_argument("--gpus", type=int, help="GPU count (default: the shape the recipe tests)")
    show.add_argument("--catalog", type=Path, default=None, help="a catalog file (default: the shipped catalog)")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=_show)


def _import(args: argparse.Namespace) -> int:
    for label, path in (("--vllm", args.vllm), ("--dynamo", args.dynamo)):
        if not path.is_dir():
            print(f"{label} {path}: not a directory", file=sys.stderr)
            return 2
    catalog, report = build_catalog(args.vllm, args.dynamo)
    write_catalog(catalog, args.out)
    print(f"imported {report.recipes} of {report.recipe_files} vLLM recipe files, {report.strategies} layouts, "
          f"{report.hardware_profiles} hardware profiles and {report.dynamo_entries} Dynamo entries from "
          f"{report.dynamo_files} DynamoGraphDeployment manifests")
    counts = {scope: sum(1 for p in report.problems if p.scope == scope) for scope in ("file", "part", "warning")}
    print(f"{counts['file']} file(s) skipped whole, {counts['part']} part(s) dropped, {counts['warning']} warning(s)")
    print(f"catalog version {catalog.version} written to {args.out}")
    for problem in report.problems:
        verb = {"file": "skipped", "part": "dropped part of", "warning": "warning in"}[problem.scope]
        print(f"{verb} {problem.file}: field {problem.field}: {problem.reason}", file=sys.stderr)
    return 1 if args.strict and report.problems else 0


def _refresh(args: argparse.Namespace) -> int:
    from wingsmith.adapters.recipes.refresh import GITHUB_API, GITHUB_RAW, RefreshFailed, refresh_catalog
    from wingsmith.domain.config import get_settings
    directory = args.catalog_dir or get_settings().home_dir / "catalogs"
    try:
        result = refresh_catalog(directory, vllm_ref=args.vllm_ref, dynamo_ref=args.dynamo_ref,
                                 api_url=args.api_url or GITHUB_API, raw_url=args.raw_url or GITHUB_RAW)
    except RefreshFailed as exc:
        print(f"refresh failed: {exc}", file=sys.stderr)
        return 1
    r = result.report
    print(f"fetched vLLM recipes @ {result.vllm_source.commit} and Dynamo @ {result.dynamo_source.commit}")
    print(f"imported {r.recipes} vLLM recipes and {r.dynamo_entries} Dynamo entries")
    for problem in r.problems:
        print(f"skipped {problem.file}: field {problem.field}: {problem.reason}", file=sys.stderr)
    print(("new catalog version " if result.created else "already stored: catalog version ")
          + f"{result.version} at {result.path}")
    return 0


def _catalogs_dir(args: argparse.Namespace) -> Path:
    from wingsmith.domain.config import get_settings
    return args.catalog_dir or get_settings().catalogs_dir


def _edit(args: argparse.Namespace) -> int:
    from wingsmith.adapters.recipes.files import catalog_in_force, put_in_force
    from wingsmith.cli.hub import parse_change
    from wingsmith.domain.recipes.catalog import RecipeEditRefused, edit_recipe
    try:
        changes = dict(parse_change(c) for c in args.changes)
    except argparse.ArgumentTypeError as exc:
        print(f"wingsmith recipes edit: {exc}", file=sys.stderr)
        return 2
    directory = _catalogs_dir(args)
    try:
        before = catalog_in_force(directory)
        after = edit_recipe(before, args.model, changes)
    except (LookupError, ValueError) as exc:  # RecipeEditRefused is a ValueError
        print(f"wingsmith recipes edit: {exc}", file=sys.stderr)
        return 1 if not isinstance(exc, RecipeEditRefused) else 2
    put_in_force(after, directory)
    print(f"catalog {after.version} in force (was {before.version}); a watch run of {args.model} now opens a draft "
          "if this changed its evidence")
    return 0


def _use(args: argparse.Namespace) -> int:
    from wingsmith.adapters.recipes.files import load_catalog_version, put_in_force
    directory = _catalogs_dir(args)
    try:
        catalog = load_catalog() if args.version == "shipped" else load_catalog_version(args.version, directory)
    except (LookupError, ValueError) as exc:
        print(f"wingsmith recipes use: {exc}", file=sys.stderr)
        return 1
    put_in_force(catalog, directory)
    print(f"catalog {catalog.version} in force")
    return 0


def _catalog(path: Path | None) -> Catalog:
    from wingsmith.adapters.recipes.files import read_catalog
    return load_catalog() if path is None else read_catalog(path)


def floor_warning(command: ServeCommand, floor_gb: float, precision: str, per_gpu_gb: float | None) -> str | None:
    """A warning when the chosen card × GPUs holds less memory than the variant's published floor."""
    if per_gpu_gb is None:
        return None
    have = per_gpu_gb * command.gpus
    if have >= floor_gb:
        return None
    return (f"{command.gpus} × {command.hardware} hold {have:g} GB, below variant {command.variant}'s floor of "
            f"{floor_gb:g} GB ({precision}): the weights alone will not fit")


def _show(args: argparse.Namespace) -> int:
    from wingsmith.domain.recipes import InvalidChoice, dynamo_entries, evidence_for, serve_command
    try:
        catalog = _catalog(args.catalog)
    except (OSError, ValueError) as exc:
        print(f"cannot read --catalog {args.catalog}: {exc}", file=sys.stderr)
        return 2
    match = catalog.find(args.model)
    if match is None:
        print(f"no recipe for {args.model} in catalog {catalog.version}", file=sys.stderr)
        return 1
    evidence = evidence_for(match, catalog)
    out: dict = {"evidence": evidence.model_dump(mode="json"),
                 "dynamo": [e.model_dump(mode="json") for e in dynamo_entries(args.model, catalog)]}
    if args.hardware and not (args.layout or evidence.default_layout):
        kind = "a vLLM-Omni recipe" if evidence.omni else "a recipe"
        print(f"invalid choice: {evidence.recipe} is {kind} with no layout; there is no vllm serve command to build",
              file=sys.stderr)
        return 1
    if args.hardware:
        try:
            command = serve_command(match, args.variant or match.variant, args.hardware,
                                    args.layout or evidence.default_layout or "", args.feature, gpus=args.gpus,
                                    catalog=catalog)
        except InvalidChoice as exc:
            print(f"invalid choice: {exc}", file=sys.stderr)
            return 1
        out["command"] = command.model_dump(mode="json")
        variant = match.recipe.variants[command.variant]
        card = next((h for h in evidence.hardware if h.id == command.hardware), None)
        warning = floor_warning(command, variant.vram_minimum_gb, variant.precision,
                                card.memory_gb_per_gpu if card else None)
        out["warnings"] = [warning] if warning else []
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{evidence.recipe} (matched {match.variant} by {match.matched_by}; catalog {catalog.version})")
    print(f"  recipe: {evidence.links.recipe}")
    for v in evidence.variants:
        print(f"  variant {v.name}: {v.precision} {v.checkpoint} floor {v.vram_minimum_gb:g} GB"
              + (" (estimate)" if v.is_estimate else ""))
    for layout in evidence.layouts:
        on = ", ".join(layout.allowed) or "none"
        print(f"  layout {layout.name}{' (default)' if layout.default else ''}: on {on}")
    for f in evidence.features:
        print(f"  feature {f.name}: {f.default}" + (f", only with {', '.join(f.strategies)}" if f.strategies else "")
              + (f", excludes {', '.join(f.excludes)}" if f.excludes else ""))
    for entry in out["dynamo"]:
        mc = entry["max_concurrency"]
        print(f"  dynamo {entry['source_path']}: {entry['model_name']} (named by {entry['model_name_source']}), "
              f"{entry['backend']} {entry['mode']} on {entry['card'] or '?'}, "
              f"{mc['setting']} {mc['value'] if mc['value'] is not None else 'not set: engine default'}")
    if "command" in out:
        c = command
        print(f"  command ({c.layout} on {c.gpus}x {c.hardware}, {c.nodes} node(s)):")
        for node in c.commands:
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in node.env.items())
            print(f"    [{node.role} {node.node_rank}] {env} {shlex.join(node.argv)}")
        for warning in out["warnings"]:
            print(f"  warning: {warning}")
    return 0
