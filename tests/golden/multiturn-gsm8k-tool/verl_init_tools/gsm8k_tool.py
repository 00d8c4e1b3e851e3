"""A GSM8K answer checker for verl's tool agent loop, written by verl-init 0.1.0 for verl 0.9.1.

verl 0.9.1 ships no GSM8K tool, so the bundle carries this one (tool_config.yaml names it). The model calls
`calc_gsm8k_reward` with its answer; the tool scores it against the row's ground truth, which verl passes from the
row's extra_info.tools_kwargs["calc_gsm8k_reward"]["create_kwargs"] (data/prepare_data.py writes it), with verl's own
GSM8K scorer, and replies with the score. The reward of the run still comes from the reward function on the
final response; the tool's reply only tells the model whether its answer is right so far.
"""

from __future__ import annotations

from typing import Any, Optional
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.reward_score import gsm8k


class Gsm8kTool(BaseTool):
    """Scores a numeric answer against the conversation's ground truth; one instance per tool call."""

    def __init__(self, config: dict, tool_schema: Optional[OpenAIFunctionToolSchema]) -> None:
        super().__init__(config, tool_schema)
        self._truth: dict[str, Optional[str]] = {}

    async def create(self, instance_id: Optional[str] = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        instance_id = instance_id or str(uuid4())
        create_kwargs = kwargs.get("create_kwargs") or {}
        self._truth[instance_id] = create_kwargs.get("ground_truth", kwargs.get("ground_truth"))
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        answer = str(parameters.get("answer", "")).strip()
        truth = self._truth.get(instance_id)
        if truth is None:
            return ToolResponse(text="No reference answer for this question."), 0.0, {}
        solution = answer if answer.startswith("####") else "#### " + answer
        score = float(gsm8k.compute_score(solution, str(truth), method="flexible", format_score=0.0, score=1.0))
        verdict = "correct" if score > 0 else "not correct"
        return ToolResponse(text=f"The answer {answer!r} is {verdict} (score {score:g})."), 0.0, {"score": score}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._truth.pop(instance_id, None)
