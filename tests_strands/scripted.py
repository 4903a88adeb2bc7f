"""A Strands model without a network: `pay N` asks for the pay tool with N (its tool use id fixed by the
question); a tool's result is answered in text naming the result and the messages the model saw."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from strands.models.model import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent


class ScriptedModel(Model):
    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, output_model: Any, prompt: Messages, system_prompt: str | None = None, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self, messages: Messages, tool_specs: Any = None, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[StreamEvent, None]:
        last = messages[-1]["content"]
        results = [block["toolResult"] for block in last if "toolResult" in block]
        yield {"messageStart": {"role": "assistant"}}
        if results:
            paid = results[0]["content"][0]["text"]
            yield {"contentBlockDelta": {"delta": {"text": f"done: {paid} after {len(messages)} messages"}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        prompt = next(block["text"] for block in last if "text" in block)
        amount = int(prompt.split()[1])
        yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": f"call-pay-{amount}", "name": "pay"}}}}
        yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps({"amount": amount})}}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}
