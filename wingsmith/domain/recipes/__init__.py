"""Recipe evidence: the plane's own catalog of upstream vLLM and NVIDIA Dynamo recipes, how a
Hugging Face id finds its recipe, the evidence a draft carries, the tested `vllm serve` command for
a choice, and the `--max-num-seqs` default from Dynamo's aggregated recipes.

The package is the pure domain; the catalog on disk (the shipped one, stored versions, the one in
force, reading upstream trees) is `wingsmith.adapters.recipes.files`, and fetching upstream is
`wingsmith.adapters.recipes.refresh`: both adapters, never imported from here."""

from wingsmith.domain.recipes.catalog import ImportReport, catalog_from_snapshots, parse_catalog
from wingsmith.domain.recipes.command import NodeCommand, ServeCommand, offered_command, serve_command
from wingsmith.domain.recipes.concurrency import MaxNumSeqsDefault, dynamo_entries, max_num_seqs_default
from wingsmith.domain.recipes.evidence import Evidence, evidence_for
from wingsmith.domain.recipes.models import Catalog, DynamoEntry, Recipe, RecipeMatch
from wingsmith.domain.recipes.problems import ImportProblem
from wingsmith.domain.recipes.rules import InvalidChoice

__all__ = [
    "Catalog", "DynamoEntry", "Evidence", "ImportProblem", "ImportReport", "InvalidChoice", "MaxNumSeqsDefault",
    "NodeCommand", "Recipe", "RecipeMatch", "ServeCommand", "catalog_from_snapshots", "dynamo_entries",
    "evidence_for", "max_num_seqs_default", "offered_command", "parse_catalog", "serve_command",
]
