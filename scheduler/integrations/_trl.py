"""TRL's GRPOTrainer with the curriculum as its sampler, and the callback that saves it.

``CurriculumGRPOTrainer`` overrides ``_get_train_sampler`` (TRL builds a RepeatSampler
there), marks evaluation rounds so their rewards are not reported, resumes the curriculum
from the checkpoint ``train(resume_from_checkpoint=...)`` names, and installs a
``CurriculumCallback`` that saves the curriculum with every checkpoint and runs probes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from datasets import IterableDataset
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
from trl import GRPOTrainer

from .._errors import ConfigError
from ..probing import ProbeRound
from ._collective import replicated_probe_round
from ._grpo import GRPOCurriculum
from ._repeat import CurriculumRepeatSampler

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
ProbeMany = Callable[[IntArray, IntArray], tuple[npt.ArrayLike, npt.ArrayLike]]


class CurriculumCallback(TrainerCallback):  # type: ignore[misc]
    """Saves the curriculum beside each Trainer checkpoint; probes every ``probe_every`` steps.

    ``probe(families, tiers) -> (scores, n)`` is the user's held-out evaluator; it runs on
    rank 0 and the other ranks replay its answers, so every replica records the same
    probes (``replicated_probe_round``)."""

    def __init__(
        self,
        curriculum: GRPOCurriculum,
        *,
        probe: ProbeMany | None = None,
        probe_every: int = 0,
    ) -> None:
        if probe_every < 0 or (probe_every and probe is None):
            raise ConfigError("CurriculumCallback: probe_every needs a probe function, >= 1")
        self.curriculum = curriculum
        self.probe = probe
        self.probe_every = probe_every
        self.probe_rounds: list[tuple[int, ProbeRound]] = []  # (global step, round)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if args.should_save:
            folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
            self.curriculum.save(folder)
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.probe is not None and state.global_step % self.probe_every == 0:
            result = replicated_probe_round(self.curriculum.scheduler, self.probe)
            self.probe_rounds.append((int(state.global_step), result))
        return control


class CurriculumGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
    """A GRPOTrainer whose train sampler is ``curriculum.sampler``.

    Pass reward functions wrapped with ``curriculum.reward(fn)`` so the scheduler hears each
    round. The Trainer's own data skip is turned off on resume: the curriculum restores its
    position itself (``ignore_data_skip=True``)."""

    def __init__(
        self,
        *args: Any,
        curriculum: GRPOCurriculum,
        probe: ProbeMany | None = None,
        probe_every: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if isinstance(self.train_dataset, IterableDataset):
            raise ConfigError(
                "CurriculumGRPOTrainer: the train dataset must be map-style (indexable); "
                "TRL streams an IterableDataset without a sampler, so there is nothing to steer"
            )
        self.curriculum = curriculum
        self.args.ignore_data_skip = True
        if self.args.dataloader_num_workers:
            raise ConfigError(
                "CurriculumGRPOTrainer: dataloader_num_workers must be 0; workers prefetch "
                "blocks ahead and the curriculum's feedback would lag further"
            )
        self._check_save_steps()
        self.curriculum_callback = CurriculumCallback(
            curriculum, probe=probe, probe_every=probe_every
        )
        self.add_callback(self.curriculum_callback)

    def _check_save_steps(self) -> None:
        """A checkpoint inside a generation round cannot be resumed exactly (TRL regenerates
        the round's completions), so saves fall on round boundaries."""
        per_round = self.args.steps_per_generation * self.num_iterations
        ga = self.args.gradient_accumulation_steps
        steps = self.args.save_steps
        aligned = not (isinstance(steps, int) and steps >= 1) or (steps * ga) % per_round == 0
        if self.args.save_strategy == "steps" and not aligned:
            every = per_round // int(np.gcd(per_round, ga))
            raise ConfigError(
                f"CurriculumGRPOTrainer: save_steps={steps} falls inside a generation round "
                f"({per_round} micro-batches); use a multiple of {every}"
            )

    def _get_train_sampler(self, dataset: Any = None) -> CurriculumRepeatSampler:
        if dataset is None:
            dataset = self.train_dataset
        return self.curriculum.sampler(
            data_source=dataset,
            mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            shuffle=self.shuffle_dataset,
            seed=self.args.seed,
        )

    def get_train_dataloader(self) -> Any:
        """TRL's loader, with a generator of its own: a DataLoader draws its workers' base
        seed when an epoch starts, from torch's global RNG unless it has one. A resumed
        Trainer restores that RNG just before, so the draw would shift every completion
        sampled after a resume, and with them the rewards the curriculum hears."""
        loader = super().get_train_dataloader()
        base = getattr(loader, "base_dataloader", loader)
        base.generator = torch.Generator().manual_seed(int(self.args.seed))
        return loader

    def _prepare_inputs(self, generation_batch: Any) -> Any:
        self.curriculum.training = bool(self.model.training)
        return super()._prepare_inputs(generation_batch)

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any) -> Any:
        if resume_from_checkpoint is True:
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
        if isinstance(resume_from_checkpoint, str):
            self.curriculum.load(resume_from_checkpoint)
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
