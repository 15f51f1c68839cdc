"""One verl training step on CPU, shaped as ``RayPPOTrainer.fit`` shapes it.

verl cannot run ``fit`` here (its rollout needs vLLM or SGLang and its actor GPU workers), so
the tests drive verl's own pieces in fit's order: ``DataProto.from_single_dict`` on the
loader's batch, a ``uid`` per prompt, ``repeat(n, interleave=True)`` and ``union`` with the
rollout, a random permutation for balancing (``reorder``), the reward as
``token_level_scores``, GRPO ``compute_advantage``, then the curriculum hook. The rollout is a
tiny random GPT-2 built from a config with ``transformers.generate``, and the tokenizer is
built here from a word list: nothing is downloaded.

Used by tests/integrations/verl_env/ inside the verl environments
(scripts/build_verl_envs.sh).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

FAMILIES = {"easy": 2, "hard": 2, "coin": 1}  # family -> tiers
VARIANTS = 4  # per tier
WORDS = [f"w{i}" for i in range(40)] + list(FAMILIES) + ["solve", "tier", "task"]

MANIFEST = """\
version: 1
domains:
  - name: math
    families:
      - {name: easy, environment: calc_sandbox, verification: exact, tiers: 2, variants: {count: 4}}
      - {name: hard, environment: prover, verification: exact, tiers: 2, variants: {count: 4}}
  - name: games
    families:
      - {name: coin, environment: coin_env, verification: exact, tiers: 1, variants: {count: 4}}
"""


def write_data(root: Path) -> tuple[Path, Path, Path]:
    """Manifest, train parquet and val parquet, in verl's column layout (gsm8k style)."""
    import pandas as pd

    root.mkdir(parents=True, exist_ok=True)
    manifest = root / "domains.yaml"
    manifest.write_text(MANIFEST)
    rows = []
    for family, tiers in FAMILIES.items():
        for tier in range(tiers):
            for variant in range(VARIANTS):
                rows.append(
                    {
                        "data_source": family,
                        "prompt": [
                            {
                                "role": "user",
                                "content": f"solve {family} tier task w{tier} w{variant}",
                            }
                        ],
                        "ability": "math",
                        "reward_model": {"style": "rule", "ground_truth": "w0"},
                        "extra_info": {"index": 1000 + len(rows), "tier": tier},
                    }
                )
    train = root / "train.parquet"
    pd.DataFrame(rows).to_parquet(train)
    val = root / "val.parquet"
    pd.DataFrame(rows[:4]).to_parquet(val)
    return manifest, train, val


def tokenizer() -> Any:
    """A word-level fast tokenizer with a chat template, built from WORDS."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.padding_side = "left"
    return fast


def model(vocab_size: int) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=vocab_size, n_positions=64, n_embd=16, n_layer=1, n_head=2)
    return GPT2LMHeadModel(config).eval()


def data_config(train: Path, val: Path, batch_size: int, **extra: Any) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "data": {
                "train_files": [str(train)],
                "val_files": [str(val)],
                "prompt_key": "prompt",
                "max_prompt_length": 32,
                "filter_overlong_prompts": False,
                "train_batch_size": batch_size,
                "val_batch_size": None,
                "dataloader_num_workers": 0,
                "shuffle": True,
                "seed": 7,
                "cache_dir": str(train.parent / "cache"),
                **extra,
            },
            "trainer": {"total_epochs": 1, "total_training_steps": None},
        }
    )


def build_loader(config: Any) -> Any:
    """verl's own ``RayPPOTrainer._create_dataloader`` (datasets, sampler and loaders),
    on a trainer with no workers."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    trainer = object.__new__(RayPPOTrainer)
    trainer.config = config
    trainer.tokenizer = tokenizer()
    trainer.processor = None
    trainer._create_dataloader(None, None, None, None)
    return trainer


RewardFn = Callable[[str, int, list[int]], float]


def default_reward(family: str, tier: int, response: list[int]) -> float:
    """easy pays at tier 0 and half the time at tier 1; hard never; coin on an even token."""
    if family == "easy":
        return 1.0 if tier == 0 or response[0] % 2 == 0 else 0.0
    if family == "coin":
        return float(response[0] % 2 == 0)
    return 0.0


def fit_step(
    batch_dict: dict[str, Any],
    step: int,
    *,
    tok: Any,
    lm: Any,
    n: int = 2,
    reward: RewardFn = default_reward,
) -> Any:
    """Everything ``fit`` does between the loader and the curriculum hook; returns the batch."""
    from verl import DataProto
    from verl.trainer.ppo.core_algos import AdvantageEstimator
    from verl.trainer.ppo.ray_trainer import compute_advantage, compute_response_mask

    batch = DataProto.from_single_dict(batch_dict)
    batch.non_tensor_batch["uid"] = np.array(
        [str(uuid.uuid4()) for _ in range(len(batch.batch))], dtype=object
    )
    gen_batch = batch.select(non_tensor_batch_keys=["raw_prompt"])
    gen_batch = gen_batch.repeat(repeat_times=n, interleave=True)
    texts = [
        tok.apply_chat_template(list(m), tokenize=False)
        for m in gen_batch.non_tensor_batch["raw_prompt"]
    ]
    enc = tok(texts, return_tensors="pt", padding=True)
    torch.manual_seed(1000 + step)  # the rollout is random, and the same in a resumed run
    with torch.no_grad():
        out = lm.generate(
            **enc,
            do_sample=True,
            max_new_tokens=3,
            min_new_tokens=3,
            pad_token_id=tok.pad_token_id,
        )
    prompts = enc["input_ids"]
    responses = out[:, prompts.shape[1] :]
    attention = torch.cat([enc["attention_mask"], torch.ones_like(responses)], dim=1)
    gen_output = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": out,
            "attention_mask": attention,
        }
    )
    batch = batch.repeat(repeat_times=n, interleave=True)
    batch = batch.union(gen_output)
    batch.batch["response_mask"] = compute_response_mask(batch)
    perm = torch.randperm(len(batch.batch), generator=torch.Generator().manual_seed(step))
    batch.reorder(perm)  # balancing scatters the groups over the ranks
    scores = torch.zeros(responses.shape, dtype=torch.float32)
    families = batch.non_tensor_batch["data_source"]
    extra = batch.non_tensor_batch["extra_info"]
    resp = batch.batch["responses"].tolist()
    for i in range(len(batch.batch)):
        scores[i, -1] = reward(str(families[i]), int(extra[i]["tier"]), resp[i])
    batch.batch["token_level_scores"] = scores
    batch.batch["token_level_rewards"] = scores
    return compute_advantage(batch, adv_estimator=AdvantageEstimator.GRPO, num_repeat=n)


def served_index(batch_dict: dict[str, Any]) -> list[int]:
    return [int(e["index"]) for e in batch_dict["extra_info"]]
