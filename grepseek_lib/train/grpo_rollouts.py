"""GRPO rollout turns on the HF backend's lean loop, with key/value reuse across the turns of each rollout.

trl's tool loop generates every turn with `model.generate` over the whole rollout so far (prompt, earlier turns,
tool results), so each turn reads again what the previous one read. When generation is plain sampling on one
process (no vLLM, no continuous batching, no DeepSpeed / FSDP, no images; temperature only, as the configs
here set it), turns are decoded by `HFBackend.generate_ids` instead: the lean loop, the same sampling
arithmetic (softmax of logits / temperature, one multinomial draw a step), and each rollout's cache kept
from its previous turn. Caches are dropped whenever the optimizer has stepped, since keys/values depend on
the weights. Under CPU autocast the turns decode on a bf16 copy of the policy refreshed at each step
(`plumbing.sampling_copy`), as the eval's bf16 backend decodes. Anything else goes to trl's own path unchanged.
"""

from __future__ import annotations

from typing import Any

from grepseek_lib.agent.backends import HFBackend
from grepseek_lib.train.plumbing import sampling_copy


def plain_sampling(config: Any) -> bool:
    """Whether a GenerationConfig asks for nothing but temperature sampling (or greedy decoding)."""
    return (getattr(config, "top_p", None) in (None, 1.0) and getattr(config, "top_k", None) in (None, 0)
            and getattr(config, "min_p", None) is None
            and getattr(config, "repetition_penalty", None) in (None, 1.0)
            and not getattr(config, "suppress_tokens", None) and getattr(config, "num_beams", None) in (None, 1))


class LeanRollouts:
    """Mixin for a GRPOTrainer: `_generate_single_turn` on the lean loop where it is exact (see the module)."""

    lean_rollouts = True
    _rollout_backend: tuple[int, Any, Any] | None = None  # (global step, policy, backend with that step's caches)
    _sampling_model: Any = None  # the bf16 copy rollouts decode with under CPU autocast, kept across steps

    def _lean_applies(self, images: Any, multimodal_fields: Any) -> bool:
        from grepseek_lib.agent import decode

        return (self.lean_rollouts and not self.use_vllm and not self.use_transformers_continuous_batching
                and self.accelerator.num_processes == 1 and not self.is_deepspeed_enabled
                and not self.is_fsdp_enabled and not images and not multimodal_fields and not self._is_vlm
                and plain_sampling(self.generation_config)
                and decode.cache_supported(self.accelerator.unwrap_model(self.model)))

    def _backend_for_step(self, model: Any) -> Any:
        step = int(self.state.global_step)
        if self._rollout_backend is None or self._rollout_backend[0] != step \
                or self._rollout_backend[1] is not model:
            self._sampling_model = sampling_copy(model, bool(self.args.bf16), self._sampling_model)
            backend = HFBackend(self._sampling_model, self._tokenizer, batch_size=1 << 16, prefix_cache=False,
                                reuse_turns=True)
            self._rollout_backend = (step, model, backend)
        return self._rollout_backend[2]

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if not self._lean_applies(images, multimodal_fields):
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                 has_tool_images)
        import torch
        from trl.models import unwrap_model_for_generation

        config = self.generation_config
        with (unwrap_model_for_generation(self.model_wrapped, self.accelerator,
                                          gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                                          generation_kwargs=self.generation_kwargs,
                                          gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs)
              as model, torch.no_grad()):
            backend = self._backend_for_step(model)
            temperature = float(config.temperature or 1.0) if config.do_sample else 0.0
            rows = backend.generate_ids(prompt_ids, max_new_tokens=int(config.max_new_tokens),
                                        temperature=temperature, eos_ids=list(self.eos_token_ids))
        return rows, None
