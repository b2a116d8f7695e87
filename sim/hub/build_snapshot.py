"""Build `snapshot.json`, the offline Hub's data, from the published configs and weight totals in
upstream's `hf-configs` (every `<org>/<name>/config.json` + `meta.json`): `--upstream`, else
`$WINGSMITH_UPSTREAM_DIR/hf-configs`, else `../shared/upstream/hf-configs` beside the repository.

    python -m sim.hub.build_snapshot [--upstream DIR] [--out FILE]

Everything derived is deterministic: the commit sha is a hash of the repo id and its config bytes;
the shard list splits the published weight total into equal shards (the last one takes the rest).
Where `meta.json` has no published total, the total comes from `DERIVED_TOTALS` and the snapshot
says so (`weight_total_kind: derived`)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

DEFAULT_UPSTREAM = (Path(os.environ["WINGSMITH_UPSTREAM_DIR"]).expanduser() if os.environ.get("WINGSMITH_UPSTREAM_DIR")
                    else Path(__file__).resolve().parents[3] / "shared" / "upstream") / "hf-configs"
DEFAULT_OUT = Path(__file__).with_name("snapshot.json")
SNAPSHOT_DATE = "2026-11-30T00:00:00.000Z"

# Weight totals for repositories whose upstream snapshot publishes none, with how they were derived
# (estimated from each config's parameter counts at the checkpoint's precision). The stand-in keeps
# its own figures rather than calling the product's estimator, so the two stay independent.
DERIVED_TOTALS: dict[str, tuple[int, str]] = {
    "openai/gpt-oss-120b": (65190326400, "estimated from config (116,829,149,760 parameters, mxfp4 4-bit on experts)"),
    "openai/gpt-oss-20b": (13751514240, "estimated from config (20,914,754,880 parameters, mxfp4 4-bit on experts)"),
}

# Hub card facts per repository, as the model pages state them (licence, gating, task). Shard
# counts follow the creators' repositories where known; otherwise ~5 GB shards.
CARDS: dict[str, dict] = {
    "moonshotai/Kimi-K3": {"license": "other", "license_name": "modified-mit", "license_link": "LICENSE",
                           "pipeline_tag": "image-text-to-text", "shards": 96,
                           "note": "licence not verified upstream (pre-release model); assumed like Kimi-K2"},
    "moonshotai/Kimi-K2-Instruct": {"license": "other", "license_name": "modified-mit", "license_link": "LICENSE",
                                    "shards": 61},
    "deepseek-ai/DeepSeek-V3": {"license": "other", "license_name": "deepseek", "license_link": "LICENSE-MODEL",
                                "shards": 163},
    "deepseek-ai/DeepSeek-R1": {"license": "mit", "shards": 163},
    "Qwen/Qwen3-235B-A22B": {"license": "apache-2.0", "license_link": "https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/LICENSE",
                             "shards": 118},
    "Qwen/Qwen3-8B": {"license": "apache-2.0", "license_link": "https://huggingface.co/Qwen/Qwen3-8B/blob/main/LICENSE",
                      "shards": 5},
    "meta-llama/Llama-3.1-8B": {"license": "llama3.1", "gated": "manual", "shards": 4},
    "meta-llama/Llama-3.3-70B-Instruct": {"license": "llama3.3", "gated": "manual", "shards": 30},
    "openai/gpt-oss-120b": {"license": "apache-2.0", "shards": 15, "original_shards": 7},
    "openai/gpt-oss-20b": {"license": "apache-2.0", "shards": 3, "original_shards": 2},
}
GIB5 = 5 * 1024**3


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def commit_sha(repo_id: str, config_bytes: bytes) -> str:
    return hashlib.sha1(b"wingsmith-snapshot\0" + repo_id.encode() + b"\0" + config_bytes).hexdigest()


def split(total: int, count: int) -> list[int]:
    base = total // count
    return [base] * (count - 1) + [total - base * (count - 1)]


def shard_files(repo_id: str, prefix: str, sizes: list[int], stem: str = "model") -> list[dict]:
    n = len(sizes)
    out = []
    for i, size in enumerate(sizes, 1):
        path = f"{prefix}{stem}-{i:05d}-of-{n:05d}.safetensors" if n > 1 else f"{prefix}{stem}.safetensors"
        digest = hashlib.sha256(f"{repo_id}\0{path}\0{size}".encode()).hexdigest()
        out.append({"path": path, "size": size, "lfs_sha256": digest,
                    "blob_id": hashlib.sha1(digest.encode()).hexdigest()})
    return out


def inline_file(path: str, content: str) -> dict:
    data = content.encode()
    return {"path": path, "size": len(data), "blob_id": git_blob_id(data), "content": content}


def build_model(repo_id: str, config_text: str, meta: dict, upstream: Path) -> dict:
    """One model's Hub record; `upstream` is the hf-configs folder being built from (a derived total
    may borrow a sibling's published figure from it)."""
    card = CARDS.get(repo_id, {})
    config = json.loads(config_text)
    total, kind, note = meta.get("total_size_bytes"), "published", meta.get("total_size_kind", "")
    if total is None:
        if repo_id == "deepseek-ai/DeepSeek-R1":
            # Same architecture, dtypes and parameter counts as DeepSeek-V3: its file total is the
            # closest published figure.
            total = json.loads((upstream / "deepseek-ai/DeepSeek-V3/meta.json").read_text())["total_size_bytes"]
            kind, note = "derived", "DeepSeek-V3's published file total (identical architecture and parameter counts)"
        elif repo_id in DERIVED_TOTALS:
            total, how = DERIVED_TOTALS[repo_id]
            kind, note = "derived", how + "; the upstream snapshot has no total"
        else:
            raise SystemExit(f"{repo_id}: the upstream snapshot has no weight total; add one to DERIVED_TOTALS")
    shards = card.get("shards") or max(1, round(total / GIB5))
    files = [inline_file(".gitattributes", "*.safetensors filter=lfs diff=lfs merge=lfs -text\n"),
             inline_file("config.json", config_text)]
    shard_list = shard_files(repo_id, "", split(total, shards))
    index = {"metadata": {"total_size": total,
                          "note": "weight_map reduced to one entry per shard in the offline snapshot"},
             "weight_map": {f"shard.{i:05d}": s["path"] for i, s in enumerate(shard_list, 1)}}
    if shards > 1:
        files.append(inline_file("model.safetensors.index.json", json.dumps(index, indent=2) + "\n"))
    files += shard_list
    if card.get("original_shards"):
        # The creators also ship the same weights in their own layout under original/.
        files.append(inline_file("original/config.json", config_text))
        files += shard_files(repo_id, "original/", split(total, card["original_shards"]), stem="model-")
    params = meta.get("parameters") or {}
    safetensors = {"parameters": params, "total": meta.get("parameters_total") or sum(params.values())} \
        if (params or meta.get("parameters_total")) else None
    card_data = {k: card[k] for k in ("license", "license_name", "license_link") if k in card}
    return {
        "id": repo_id, "author": repo_id.split("/")[0], "sha": commit_sha(repo_id, config_text.encode()),
        "private": False, "gated": card.get("gated", False), "disabled": False,
        "pipeline_tag": card.get("pipeline_tag", "text-generation"), "library_name": "transformers",
        "tags": ["transformers", "safetensors", config.get("model_type", "")] + (
                [f"license:{card['license']}"] if "license" in card else []),
        "cardData": card_data, "createdAt": SNAPSHOT_DATE, "lastModified": SNAPSHOT_DATE,
        "safetensors": safetensors,
        "weight_total": total, "weight_total_kind": kind, "weight_total_note": note,
        "notes": [n for n in (card.get("note"),) if n],
        "files": files,
    }


def build(upstream: Path) -> dict:
    models = {}
    for config_path in sorted(upstream.glob("*/*/config.json")):
        repo_id = f"{config_path.parent.parent.name}/{config_path.parent.name}"
        meta_path = config_path.with_name("meta.json")
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        models[repo_id] = build_model(repo_id, config_path.read_text(), meta, upstream)
    return {"about": "Offline Hugging Face Hub snapshot for Wingsmith, built by sim/hub/build_snapshot.py "
                     "from shared/upstream/hf-configs (config.json as published; weight totals from meta.json). "
                     "Shard payloads are not stored: only their sizes.",
            "models": models}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, default=DEFAULT_UPSTREAM)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    snapshot = build(args.upstream)
    args.out.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(snapshot['models'])} models to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
