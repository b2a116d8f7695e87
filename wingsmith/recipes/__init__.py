"""Recipe evidence: the plane's own catalog of upstream vLLM and NVIDIA Dynamo recipes, how a
Hugging Face id finds its recipe, the evidence a draft carries, the tested `vllm serve` command for
a choice, and the `--max-num-seqs` default from Dynamo's aggregated recipes."""

from wingsmith.recipes.catalog import (
                                       CatalogVersionExists,
                                       ImportReport,
                                       build_catalog,
                                       load_catalog,
                                       load_catalog_version,
                                       read_catalog,
                                       store_catalog_version,
                                       write_catalog,
)
from wingsmith.recipes.command import NodeCommand, ServeCommand, offered_command, serve_command
from wingsmith.recipes.concurrency import MaxNumSeqsDefault, dynamo_entries, max_num_seqs_default
from wingsmith.recipes.evidence import Evidence, evidence_for
from wingsmith.recipes.models import Catalog, DynamoEntry, Recipe, RecipeMatch
from wingsmith.recipes.problems import ImportProblem
from wingsmith.recipes.rules import InvalidChoice

__all__ = [
    "Catalog", "CatalogVersionExists", "DynamoEntry", "Evidence", "ImportProblem", "ImportReport", "InvalidChoice",
    "MaxNumSeqsDefault", "NodeCommand", "Recipe", "RecipeMatch", "ServeCommand", "build_catalog", "dynamo_entries",
    "evidence_for", "load_catalog", "load_catalog_version", "max_num_seqs_default", "offered_command", "read_catalog",
    "serve_command",
    "store_catalog_version", "write_catalog",
]
