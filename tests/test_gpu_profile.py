"""The GPU side, checked without a GPU: the `gpu` profile and configs/paper.yaml are accepted whole, every
notebook that runs a policy takes backend / base URL / model / LoRA as parameters and hard-wires no backend,
and the accelerate launch configs are read by accelerate's own launcher."""

from __future__ import annotations

import ast
import dataclasses

import jupytext
import papermill
import pytest

from grepseek_lib import config, pipeline
from grepseek_lib.data.importer import split_file
from grepseek_lib.errors import UserError
from grepseek_lib.train import devices
from grepseek_lib.train.configs import load_config

NOTEBOOKS = config.REPO_ROOT / "notebooks"
PAPER = config.REPO_ROOT / "configs" / "paper.yaml"
#: What each notebook that runs a policy (or imports data for one) must take as parameters.
POLICY_PARAMETERS = {
    "00_data": {"import_corpus", "import_benchmarks", "train_splits"},
    "02_cold_start": {"model", "teacher", "teacher_base_url", "teacher_model", "train_splits"},
    "03_sft": {"model", "lora", "train_config"},
    "04_grpo": {"backend", "lora", "train_config", "train_splits"},
    "05_eval": {"model", "backend", "base_url"},
}
#: Library calls that run a policy and would pick a backend themselves if not told one, with the number of
#: positional arguments that reach their backend argument (evaluate_baseline takes it by keyword only).
EVALUATIONS = {"evaluate": 2, "evaluate_baseline": 99}
BACKEND_NAMES = ('"hf"', '"vllm"', '"openai"', "'hf'", "'vllm'", "'openai'")


@pytest.mark.parametrize("stage", sorted(POLICY_PARAMETERS))
def test_policy_notebooks_take_their_settings_as_parameters(stage):
    declared = set(papermill.inspect_notebook(str(NOTEBOOKS / f"{stage}.ipynb")))
    assert POLICY_PARAMETERS[stage] <= declared, POLICY_PARAMETERS[stage] - declared


@pytest.mark.parametrize("stage", [*pipeline.STAGES, "07_trajectories"])
def test_no_notebook_hard_wires_a_backend(stage):
    cells = [c for c in jupytext.read(NOTEBOOKS / f"{stage}.py").cells if c.cell_type == "code"]
    body = "\n".join(c.source for c in cells if "parameters" not in c.metadata.get("tags", []))
    assert not [name for name in BACKEND_NAMES if name in body]
    # and none leaves it to a library default: every agent / reader evaluation is told its backend
    for node in ast.walk(ast.parse(body)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in EVALUATIONS:
            keywords = {k.arg for k in node.keywords}
            positional = len(node.args) >= EVALUATIONS[getattr(node.func, "attr", getattr(node.func, "id", ""))]
            assert positional or keywords & {"backend_kind", "backend"}, ast.unparse(node)[:80]


def test_gpu_profile_with_the_paper_params_is_accepted_whole(tmp_path):
    params = pipeline.resolve_params("gpu", tmp_path / "run", pipeline.load_params_file(PAPER))
    declared = set()
    for stage in pipeline.STAGES:
        declared |= set(papermill.inspect_notebook(str(NOTEBOOKS / f"{stage}.ipynb")))
    assert set(params) - {"run_dir", "raw_dir", "data_dir", "models_dir"} <= declared
    assert params["model"] == "Qwen/Qwen3.5-9B" and params["lora"] is True and params["teacher"] == "openai"
    assert params["teacher_base_url"].startswith("http") and params["train_splits"] == ["nq_train", "hotpotqa_train"]
    assert [split_file(s) for s in params["train_splits"]] == ["nq/train.jsonl", "hotpotqa/train.jsonl"]
    assert params["benchmarks"] == list(config.BENCHMARKS)
    cfg = load_config(params["train_config"])
    grpo = dataclasses.replace(cfg.grpo, questions_per_step=params["grpo_questions"],
                               num_generations=params["grpo_generations"],
                               per_device_train_batch_size=params["grpo_generations"],
                               use_vllm=devices.rollout_vllm(params["backend"]))
    assert grpo.accumulation_for(1) == 256 and grpo.accumulation_for(8) == 32
    # on this CPU, auto means the transformers backend; on a GPU with vllm it means vLLM
    assert devices.policy_backend(params["backend"]) == "hf" and devices.backend_options("auto") == {}
    gpu = pipeline.resolve_params("gpu", tmp_path / "run", {})
    assert gpu["model"] == "Qwen/Qwen3-4B" and gpu["lora"] is False and gpu["train_config"] == "gpu"


def test_backend_parameter_mistakes_are_one_clear_line():
    with pytest.raises(UserError, match="backend must be one of"):
        devices.policy_backend("vlm")
    with pytest.raises(UserError, match="base_url is for the openai backend"):
        devices.backend_options("hf", "http://localhost:8000/v1")
    with pytest.raises(UserError, match="GRPO generates with the policy it trains"):
        devices.rollout_vllm("openai")
    assert devices.backend_options("openai", "http://h:1/v1") == {"base_url": "http://h:1/v1"}
    with pytest.raises(UserError, match="unknown parameter"):
        pipeline.resolve_params("gpu", config.REPO_ROOT / "runs" / "x", {"lora_rank": 8})


@pytest.mark.parametrize("name", ["ddp", "fsdp", "deepspeed_zero3"])
def test_accelerate_launch_configs_are_read_by_accelerate(name):
    from accelerate.commands.config.config_args import load_config_from_file

    cfg = load_config_from_file(str(config.REPO_ROOT / "configs" / "accelerate" / f"{name}.yaml"))
    expected = {"ddp": "MULTI_GPU", "fsdp": "FSDP", "deepspeed_zero3": "DEEPSPEED"}[name]
    assert str(cfg.distributed_type).endswith(expected) and cfg.mixed_precision == "bf16"
    assert cfg.num_machines == 1 and cfg.use_cpu is False
    if name == "fsdp":
        assert cfg.fsdp_config["fsdp_version"] == 2
    if name == "deepspeed_zero3":
        assert cfg.deepspeed_config["zero_stage"] == 3


def test_full_cpu_profile_is_accepted_and_trains_on_everything(tmp_path):
    params = pipeline.resolve_params("full", tmp_path / "run", {})
    declared = set()
    for stage in pipeline.STAGES:
        declared |= set(papermill.inspect_notebook(str(NOTEBOOKS / f"{stage}.ipynb")))
    assert set(params) - {"run_dir", "raw_dir", "data_dir", "models_dir"} <= declared
    assert params["sft_max_examples"] is None and params["eval_limit"] >= 30
    assert params["grpo_questions"] * params["grpo_generations"] * params["grpo_steps"] >= 32
    assert params["train_config"] == "cpu" and params["model"] == "smollm2"
