"""The scheduler inside TRL's GRPOTrainer (extra ``[trl]``).

    from scheduler.integrations.trl import CurriculumGRPOTrainer, GRPOCurriculum

    curriculum = GRPOCurriculum(sched)  # columns family, tier, variant (DatasetColumns)
    trainer = CurriculumGRPOTrainer(
        model=model, args=GRPOConfig(...), train_dataset=ds,
        reward_funcs=[curriculum.reward(my_reward, success=0.5)],
        curriculum=curriculum, probe=evaluate, probe_every=50,
    )
    trainer.train()

With a GRPOTrainer of your own, override one method and add the callback:

    def _get_train_sampler(self, dataset=None):
        return curriculum.sampler(data_source=dataset or self.train_dataset,
                                  mini_repeat_count=self.num_generations, ...)

docs/integrations.md explains each knob and the feedback lag.
"""

from ._groups import Completions, GroupReport, aggregate_groups
from ._grpo import STATE_FILE, CurriculumReward, GRPOCurriculum
from ._repeat import CurriculumRepeatSampler
from ._stream import CurriculumStream
from ._trl import CurriculumCallback, CurriculumGRPOTrainer

__all__ = [
    "STATE_FILE",
    "Completions",
    "CurriculumCallback",
    "CurriculumGRPOTrainer",
    "CurriculumRepeatSampler",
    "CurriculumReward",
    "CurriculumStream",
    "GRPOCurriculum",
    "GroupReport",
    "aggregate_groups",
]
