"""What the simulated operator reads from a DynamoGraphDeployment: its components (v1beta1
`spec.components` list or v1alpha1 `spec.services` map) and the model name its workers serve."""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Any

_ENV_REF = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_NAME_FLAGS = ("--served-model-name",)
_MODEL_FLAGS = ("--model", "--model-path")
# The engines' limit on sequences running at once: vLLM, SGLang, TensorRT-LLM.
_SLOTS_FLAGS = ("--max-num-seqs", "--max-running-requests", "--max_batch_size", "--max-batch-size")
# Components that run beside the engines and serve no tokens themselves.
AUXILIARY_TYPES = ("epp", "planner")


@dataclass(frozen=True)
class Component:
    name: str
    type: str
    replicas: int = 1
    node_count: int = 1
    gpus_per_pod: int = 0
    image: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def is_frontend(self) -> bool:
        return self.type == "frontend"

    @property
    def is_engine(self) -> bool:
        """A worker that serves tokens (aggregated, prefill or decode), not the frontend or a helper."""
        return not self.is_frontend and self.type not in AUXILIARY_TYPES

    @property
    def spec_hash(self) -> str:
        """The pod template's identity. Dynamo's operator leaves the replica count out of its worker
        spec hash, so a scale starts no rolling update: only a change of this hash replaces pods."""
        return hashlib.sha256(repr(replace(self, replicas=0)).encode()).hexdigest()[:10]


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


def _env(items: list[dict[str, Any]] | None) -> dict[str, str]:
    return {e["name"]: str(e["value"]) for e in items or [] if "name" in e and "value" in e}


def components(dgd: dict[str, Any]) -> list[Component]:
    spec = dgd.get("spec") or {}
    if "components" in spec:
        return [_beta_component(c) for c in spec["components"]]
    return [_alpha_component(name, s) for name, s in (spec.get("services") or {}).items()]


def _beta_component(c: dict[str, Any]) -> Component:
    pod = (c.get("podTemplate") or {}).get("spec") or {}
    containers = pod.get("containers") or [{}]
    main = next((x for x in containers if x.get("name") == "main"), containers[0])
    resources = main.get("resources") or {}
    gpus = ((resources.get("limits") or {}).get("nvidia.com/gpu")
            or (resources.get("requests") or {}).get("nvidia.com/gpu"))
    return Component(
        name=c["name"], type=c.get("type") or "worker", replicas=_int(c.get("replicas"), 1),
        node_count=_int((c.get("multinode") or {}).get("nodeCount"), 1), gpus_per_pod=_int(gpus, 0),
        image=main.get("image", ""), node_selector=dict(pod.get("nodeSelector") or {}),
        command=tuple(main.get("command") or ()), args=tuple(main.get("args") or ()), env=_env(main.get("env")),
    )


def _alpha_component(name: str, s: dict[str, Any]) -> Component:
    extra = s.get("extraPodSpec") or {}
    main = extra.get("mainContainer") or {}
    resources = s.get("resources") or {}
    gpus = (resources.get("limits") or {}).get("gpu") or (resources.get("requests") or {}).get("gpu")
    is_sub_worker = s.get("componentType") == "worker" and s.get("subComponentType")
    kind = s.get("subComponentType") if is_sub_worker else s.get("componentType")
    return Component(
        name=name, type=kind or "worker", replicas=_int(s.get("replicas"), 1),
        node_count=_int((s.get("multinode") or {}).get("nodeCount"), 1), gpus_per_pod=_int(gpus, 0),
        image=main.get("image", ""), node_selector=dict(extra.get("nodeSelector") or {}),
        command=tuple(main.get("command") or ()), args=tuple(main.get("args") or ()),
        env={**_env(s.get("envs")), **_env(main.get("env"))},
    )


def _expand(text: str, env: dict[str, str]) -> str:
    return _ENV_REF.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), text)


def _tokens(component: Component) -> list[str]:
    # Recipes put the whole engine command line in one shell string, with backslash-newlines.
    text = " ".join(shlex.quote(a) if " " not in a and "\n" not in a else a for a in component.args)
    try:
        return shlex.split(text.replace("\\\n", " "))
    except ValueError:
        return text.split()


def _flag_values(tokens: list[str], flags: tuple[str, ...]) -> list[str]:
    for i, token in enumerate(tokens):
        name, eq, value = token.partition("=")
        if name in flags:
            if eq:
                return [value]
            values = []
            for following in tokens[i + 1:]:
                if following.startswith("-"):
                    break
                values.append(following)
            return values
    return []


def served_model_names(dgd: dict[str, Any]) -> list[str]:
    """`--served-model-name` of the first worker, else its `--model`/`--model-path`, else the
    `SERVED_MODEL_NAME`/`MODEL_PATH` env, else the deployment's name."""
    for component in components(dgd):
        if component.is_frontend:
            continue
        tokens = [_expand(t, component.env) for t in _tokens(component)]
        names = _flag_values(tokens, _NAME_FLAGS) or _flag_values(tokens, _MODEL_FLAGS)
        names = [n for n in names if not _ENV_REF.search(n)]
        if names:
            return names
        for key in ("SERVED_MODEL_NAME", "MODEL_PATH"):
            if component.env.get(key):
                return [component.env[key]]
    return [(dgd.get("metadata") or {}).get("name", "model")]


def max_num_seqs(dgd: dict[str, Any], most: int) -> int | None:
    """How many sequences one replica runs at once, as its engine's command line says (the decode
    worker's when prefill and decode are apart); None when it says nothing usable (at most `most`)."""
    engines = sorted((c for c in components(dgd) if c.is_engine), key=lambda c: c.type != "decode")
    for component in engines:
        values = _flag_values([_expand(t, component.env) for t in _tokens(component)], _SLOTS_FLAGS)
        if values:
            value = _int(values[0], 0)
            return value if 1 <= value <= most else None
    return None
