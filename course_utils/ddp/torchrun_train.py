"""Notebook 04's DDP training as a script that torchrun runs on one node or many.

    python -m torch.distributed.run --nnodes=2 --nproc-per-node=4 --node-rank=0 \\
        --master-addr=NODE0_ADDRESS --master-port=29500 \\
        -m course_utils.ddp.torchrun_train --epochs 3 --per-rank-batch 8 --lr 0.05

Every rank builds the same model from the same seed, wraps it in
DistributedDataParallel, trains on its DistributedSampler shard of an 80/20
`random_split` (as the report does), and rank 0 prints one JSON line per rank with the
final losses and accuracies, where the rank ran (node, local rank, agent), the samples its
loader yielded per update, and a digest of its own parameters taken before any
collective touches the result: equal digests mean the replicas really ended equal.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from ..core import data, models, profiles, progress
from ..core.training import Evaluation, Recipe, train
from ..ranks.bootstrap import join_from_torchrun, leave
from ..ranks.examples import whoami
from ..ranks.torchrun import report_results


def build_parser() -> argparse.ArgumentParser:
    p = profiles.current()
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.ddp.torchrun_train", description=__doc__
    )
    parser.add_argument("--dataset", default=p.dataset, choices=["mnist1d", "cifar10"])
    parser.add_argument("--model", default=p.model, choices=sorted(models.MODELS))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--per-rank-batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    return parser


DIGEST_PROJECTIONS = 4


def parameter_digest(model: torch.nn.Module) -> list[float]:
    """A few fixed random projections of every parameter (float64): two replicas whose
    digests agree to rounding hold the same weights, while one differing weight shows."""
    flat = torch.cat([p.detach().double().flatten().cpu() for p in model.parameters()])
    g = torch.Generator().manual_seed(1234)
    directions = torch.randn(  # cpu: beside the CPU copy of the weights, seeded alike everywhere
        DIGEST_PROJECTIONS, flat.numel(), generator=g, dtype=torch.float64
    )
    return (directions @ flat).tolist()


class CountingLoader:
    """A loader that counts the samples it yields: what a rank really consumed per update."""

    def __init__(self, loader):
        self.loader, self.samples = loader, 0

    def __getattr__(self, name):  # sampler, batch_sampler: train tells them the epoch
        return getattr(self.loader, name)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        for x, y in self.loader:
            self.samples += len(y)
            yield x, y


def run(args: argparse.Namespace) -> dict:
    """Train this rank's replica; returns its view of the run (the metrics are global)."""
    where = join_from_torchrun(args.backend)
    d = data.load(args.dataset)
    train_set, val_set = data.train_val_split(d.train, 0.2, seed=args.seed)
    model = models.build(args.model, d.input_shape, d.num_classes, seed=args.seed).to(where)
    loader = CountingLoader(
        data.shard_loader(train_set, args.per_rank_batch, seed=args.seed, drop_last=True)
    )
    updates = args.epochs * len(loader)
    ranks = dist.get_world_size()
    with progress.bar(updates, f"DDP on {ranks} ranks", "update", show=dist.get_rank() == 0) as bar:
        history = train(
            DDP(model),
            loader,
            Recipe(epochs=args.epochs, lr=args.lr, device=where, progress=False),
            Evaluation(
                val_loader=data.shard_loader(val_set, 512, shuffle=False),
                test_loader=data.shard_loader(d.test, 512, shuffle=False),
            ),
            after_step=lambda steps, loss: bar.update(1),
        )
    return {
        **whoami(),
        "parameter_digest": parameter_digest(model),
        "samples_per_update": loader.samples / history.steps,
        "per_rank_batch": args.per_rank_batch,
        "steps": history.steps,
        "train_loss": history.epoch_train_loss[-1],
        "val_acc": history.epoch_val_acc[-1],
        "test_acc": history.test_acc,
        "seconds": history.seconds,
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    report_results(run(args))
    leave(0)


if __name__ == "__main__":
    sys.exit(main())
