"""GRPO with the curriculum as the sampler: TRL's GRPOTrainer on CPU, nothing downloaded.

    pip install -e ".[trl]"   # TRL 1.16, beside the torch you have
    python examples/grpo_curriculum.py --steps 8

A tiny GPT-2 with random weights and a word-level tokenizer are built here, from configs.
The dataset has 200 rows over four families at two tiers; each family's reward counts a
different word in the completion, so the families learn at different rates and the
scheduler's weights move. The script prints what the scheduler heard and where it now
sends the samples. tests/integrations/test_trl.py runs this file.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from domains import Catalog
from scheduler import Scheduler
from scheduler.integrations.trl import CurriculumGRPOTrainer, GRPOCurriculum

WORDS = ["red", "green", "blue", "gold", "one", "two", "three", "four", "say", "a", "word"]
# family -> the word its reward counts
TARGET = {
    "domain_0.family_0": "red",
    "domain_0.family_1": "green",
    "domain_1.family_0": "blue",
    "domain_1.family_1": "gold",
}


def word_tokenizer() -> Any:
    """A word-level tokenizer built in memory: no vocabulary file, no download."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[EOS]", *WORDS])}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]"
    )
    fast.padding_side = "left"
    return fast


def tiny_model(tokenizer: Any, seed: int = 0) -> Any:
    """A one-layer GPT-2 from a config, random weights."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=32,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return GPT2LMHeadModel(config)


def catalog() -> Catalog:
    """Four families (two domains of two) at two tiers; pools of 32 variants, of which the
    dataset holds 25 per tier: the rows each (family, tier) has are its pool."""
    return Catalog.synthetic(n_domains=2, families_per_domain=2, n_tiers=2, pool_size=32)


def dataset(cat: Catalog, rows: int = 200, seed: int = 0) -> Any:
    """``rows`` prompts spread over every (family, tier), in a shuffled order."""
    from datasets import Dataset

    per_arm = rows // cat.n_arms
    arm = np.repeat(np.arange(cat.n_arms), per_arm)
    variant = np.tile(np.arange(per_arm), cat.n_arms)
    order = np.random.default_rng(seed).permutation(arm.shape[0])
    arm, variant = arm[order], variant[order]
    family = cat.family_of_arm[arm]
    tier = cat.tier_of_arm[arm]
    return Dataset.from_dict(
        {
            "prompt": [f"say a word {WORDS[4 + int(v) % 4]}" for v in variant.tolist()],
            "family": [cat.family_names[f] for f in family.tolist()],
            "tier": tier.tolist(),
            "variant": variant.tolist(),
        }
    )


def count_target(
    prompts: Sequence[str], completions: Sequence[str], family: Sequence[str], **_: Any
) -> list[float]:
    """Reward in [0, 1]: the share of the completion's words that are the family's word."""
    out = []
    for text, name in zip(completions, family, strict=True):
        words = text.split()
        target = TARGET[name]
        out.append(sum(w == target for w in words) / max(len(words), 1))
    return out


def probe_for(sched: Scheduler) -> Any:
    """A held-out probe stand-in, ``(families, tiers) -> (scores, n)``: here each arm's
    recent mean reward. A real run evaluates the model on the family's probe set."""
    cat = sched.catalog

    def evaluate(families: np.ndarray, tiers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean = sched.stats.reward_fast[cat.arm_start[families] + tiers]
        return np.nan_to_num(mean, nan=0.0).clip(0, 1), np.full(families.shape, 8)

    return evaluate


def grpo_args(output_dir: str, steps: int, **overrides: Any) -> Any:
    from trl import GRPOConfig

    options: dict[str, Any] = {
        "output_dir": output_dir,
        "per_device_train_batch_size": 8,
        "num_generations": 4,  # so a block is 8 / 4 = 2 prompts per rank
        "max_completion_length": 4,
        "max_steps": steps,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "use_cpu": True,
        "bf16": False,
        "gradient_checkpointing": False,
        "dataloader_num_workers": 0,
        "seed": 0,
        "disable_tqdm": True,
    }
    options.update(overrides)
    return GRPOConfig(**options)


def build(
    output_dir: str, steps: int, seed: int = 0, eval_dataset: Any = None, **overrides: Any
) -> tuple[CurriculumGRPOTrainer, GRPOCurriculum]:
    """The trainer and its curriculum, ready for ``trainer.train()``."""
    torch.set_num_threads(1)
    cat = catalog()
    sched = Scheduler(cat, "learning_progress", seed=seed)
    curriculum = GRPOCurriculum(sched)  # reads the columns family, tier and variant
    tokenizer = word_tokenizer()

    trainer = CurriculumGRPOTrainer(
        model=tiny_model(tokenizer, seed),
        args=grpo_args(output_dir, steps, **overrides),
        train_dataset=dataset(cat),
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        reward_funcs=[curriculum.reward(count_target, success=0.5)],
        curriculum=curriculum,
        probe=probe_for(sched),
        probe_every=4,
    )
    return trainer, curriculum


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--output-dir", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        trainer, curriculum = build(args.output_dir or os.path.join(tmp, "run"), args.steps)
        trainer.train()
    sched = curriculum.scheduler
    stream = curriculum.stream
    weights = sched.weights().family
    print(f"blocks drawn {stream.drawn}, reported {stream.reported}")
    print(f"feedback lag {stream.feedback_lag()} blocks (block k's rewards shape block k+2)")
    print(f"zero-variance groups {int(stream.zero_variance.sum())} of {int(stream.groups.sum())}")
    for name, w in zip(sched.catalog.family_names, weights.tolist(), strict=True):
        print(f"  {name:22s} weight {w:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
