"""Which generation backend a run gets, from one `backend` parameter shared by the notebooks and profiles.

"auto" is vLLM where a CUDA GPU and the vllm package are both present, else the transformers (HF) backend,
so the same parameters run on a laptop (HF on CPU) and on a GPU box (vLLM) without edits. vLLM engines are
not freed inside one process, so evaluation gives each of its four engines (zero-shot, SFT and GRPO policies,
the BM25 reader) a fifth of the GPU's memory instead of vLLM's default 0.9.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from grepseek_lib.errors import UserError

BACKENDS = ("auto", "hf", "vllm", "openai")
#: GPU memory share of one vLLM engine during evaluation (three policies and the BM25 reader's base model).
EVAL_VLLM_MEMORY = 0.2


def vllm_available() -> bool:
    """A CUDA device and the vllm package, both."""
    import torch

    return bool(torch.cuda.is_available()) and importlib.util.find_spec("vllm") is not None


def _check(backend: str) -> str:
    if backend not in BACKENDS:
        raise UserError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


def policy_backend(backend: str) -> str:
    """The agent's backend for evaluation: auto -> vllm or hf; hf, vllm, openai as given."""
    if _check(backend) == "auto":
        return "vllm" if vllm_available() else "hf"
    return backend


def backend_options(backend: str, base_url: str | None = None) -> dict[str, Any]:
    """Constructor keywords for `make_backend(policy_backend(...), ...)`: the server of the openai backend, the
    memory share of a vLLM engine."""
    kind = policy_backend(backend)
    if kind == "openai":
        return {"base_url": base_url} if base_url else {}
    if base_url:
        raise UserError(f"base_url is for the openai backend; backend {backend!r} runs the model here")
    return {"gpu_memory_utilization": EVAL_VLLM_MEMORY} if kind == "vllm" else {}


def rollout_vllm(backend: str) -> str | bool:
    """GRPO's `use_vllm` setting: auto -> "auto" (vLLM when available), vllm -> True, hf -> False."""
    if _check(backend) == "openai":
        raise UserError("GRPO generates with the policy it trains: backend must be auto, hf or vllm, not openai")
    return {"auto": "auto", "vllm": True, "hf": False}[backend]
