"""The training loss with PaLM's z-loss: a known answer, and what it changes in a run's identity."""

import torch
import torch.nn.functional as F

import zoo
from trainkit import run_dir_of, tiny_experiment
from zoo.trainer.objective import training_loss_sum


def test_the_z_loss_adds_z_times_the_squared_log_partition_of_each_counted_position():
    torch.manual_seed(0)
    logits, labels = torch.randn(2, 3, 7) * 3, torch.tensor([[4, 5, 0], [6, 0, 0]])
    plain = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=0, reduction="sum")
    assert torch.equal(training_loss_sum(logits, labels, 0), plain)
    partitions = torch.stack([logits[0, 0], logits[0, 1], logits[1, 0]]).logsumexp(-1)
    torch.testing.assert_close(training_loss_sum(logits, labels, 0, z_loss=1e-2), plain + 1e-2 * partitions.square().sum())


def test_a_run_with_the_z_loss_trains_in_a_folder_of_its_own(tmp_path):
    default = run_dir_of(tiny_experiment(tmp_path))
    assert run_dir_of(tiny_experiment(tmp_path, train={"z_loss": 0.0})) == default, "the default keeps old folders"
    experiment = tiny_experiment(tmp_path, train={"z_loss": 1e-2, "steps": 40, "eval_every": 20})
    assert run_dir_of(experiment) != default
    result = zoo.train(experiment)
    assert result.history[0]["train/loss"] > result.metrics["eval/loss"]
