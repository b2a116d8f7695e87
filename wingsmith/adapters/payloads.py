"""Payload budgets: how big a piece of data may be when it enters a Temporal payload.

Temporal refuses a payload above 2 MB (a gRPC message above 4 MB). An activity whose result is too
big is reported as failed and retried forever; a workflow task whose commands are too big fails and
retries forever. Neither ends, and neither says which data was too big. So big data is stopped twice:

- at its source, with the reason in the user's words: the Hub resolver refuses a config.json or a
  model card above `HUB_FILE_LIMIT` (`config.json is 3.1 MB; the limit is 1 MB`), the API bounds
  every list it takes (`wingsmith.domain.text.MAX_LIST` and the like), so no workflow input can grow past
  the budget;
- everywhere else, by `PayloadBudgetCodec` in every client's and worker's data converter: a payload
  above `PAYLOAD_BUDGET` is refused while it is encoded with a non-retryable `PayloadTooLarge` that
  names what and how big. For an activity's result that fails the activity at once (the workflow
  sees a clear failure, not a retry loop); for a client's request it fails the call. A workflow's
  own commands cannot be failed that way (the task would retry), which is why their inputs are
  bounded at the source.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    ActivitySerializationContext,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
    WorkflowSerializationContext,
)
from temporalio.exceptions import ApplicationError

MB = 1_000_000
# Upstream files the plane reads into an artifact's proposal: real config.json files are tens of KB.
HUB_FILE_LIMIT = 1 * MB
# Below Temporal's 2 MiB per payload with room for encryption's overhead and a few payloads per message.
PAYLOAD_BUDGET = 3 * MB // 2


def describe_size(size: int) -> str:
    """Bytes as people read them: `3.1 MB`, `1 MB`, `512 KB`."""
    if size >= MB:
        return f"{size / MB:.1f}".removesuffix(".0") + " MB"
    if size >= 1000:
        return f"{size / 1000:.0f} KB"
    return f"{size} bytes"


def over_limit(what: str, size: int, limit: int) -> str:
    """`config.json is 3.1 MB; the limit is 1 MB`."""
    return f"{what} is {describe_size(size)}; the limit is {describe_size(limit)}"


class PayloadBudgetCodec(PayloadCodec, WithSerializationContext):
    """Refuses to encode a payload above the budget; decodes everything unchanged (a history written
    before the budget stays readable)."""

    def __init__(self, budget: int = PAYLOAD_BUDGET, context: SerializationContext | None = None):
        self.budget = budget
        self.context = context

    def with_context(self, context: SerializationContext) -> PayloadBudgetCodec:
        return PayloadBudgetCodec(self.budget, context)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        for payload in payloads:
            size = payload.ByteSize()
            if size > self.budget:
                raise ApplicationError(over_limit(self._what(), size, self.budget) + " (Temporal refuses payloads "
                                       "above 2 MB); keep large data in the registry and pass its id",
                                       type="PayloadTooLarge", non_retryable=True)
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    def _what(self) -> str:
        ctx = self.context
        if isinstance(ctx, ActivitySerializationContext):
            where = f" of workflow {ctx.workflow_id}" if ctx.workflow_id else ""
            if activity.in_activity() and activity.info().activity_id == ctx.activity_id:
                return f"the result of activity {ctx.activity_type or activity.info().activity_type}{where}"
            return f"a payload for activity {ctx.activity_type or '(unnamed)'}{where}"
        if isinstance(ctx, WorkflowSerializationContext):
            return f"a payload of workflow {ctx.workflow_id}"
        return "a payload"


class CodecChain(PayloadCodec, WithSerializationContext):
    """Codecs applied in order when encoding and in reverse when decoding (the budget sees the plain
    payload, before encryption)."""

    def __init__(self, codecs: Sequence[PayloadCodec]):
        self.codecs = list(codecs)

    def with_context(self, context: SerializationContext) -> CodecChain:
        return CodecChain([c.with_context(context) if isinstance(c, WithSerializationContext) else c
                           for c in self.codecs])

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = list(payloads)
        for codec in self.codecs:
            out = await codec.encode(out)
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = list(payloads)
        for codec in reversed(self.codecs):
            out = await codec.decode(out)
        return out
