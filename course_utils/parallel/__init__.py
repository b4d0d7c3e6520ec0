"""The algorithms the course teaches, each written once as plain `torch.distributed` code.

One file per idea, read top to bottom in one sitting, in the spirit of picotron and
PyTorch's `dist_tuto`: nothing in it traces, times, judges or draws. The chapters run,
time, check and draw them from outside: messages are counted, and charged on the
simulated network, where they cross `torch.distributed` (`network.recorder`). This package
imports torch and itself only, so a spawned rank that needs an algorithm starts quickly.

- `allreduce`: parameter server, tree, butterfly, ring (and its reduce-scatter and
  all-gather halves), halving-doubling (notebook 05; the ring also serves ZeRO in 08).
- `data_parallel`: gradients averaged by hand after backward, and in buckets while
  backward runs, on any model (notebooks 04 and 10).
- `zero`, `zero3`: DDP and ZeRO's stages 1, 2 and 3, each a class of its own, with any
  optimizer (notebook 08).
- `pipeline`: one engine for every one-chunk schedule (naive, GPipe, 1F1B): a stage's
  forwards and backwards in the schedule's order, hand-offs point to point (notebook 06's
  MLP, and the `pp` dimension of 11's mesh).
- `tensor_parallel`: Megatron's f and g, the column- and row-parallel layers, on any
  process group (notebook 06's MLP, 10's transformer, one dimension of 11's mesh).
- `sequence_parallel`: f and g turned into an all-gather and a reduce-scatter along the
  sequence (notebook 10).
- `context_parallel`: ring attention, the keys and values passed round a ring, with the
  zigzag split that balances the causal mask's work (notebook 10).
- `expert_parallel`: a mixture of experts whose tokens travel to their experts and back
  by all-to-all (notebook 10).
- `parameter_server`: workers that push gradients and pull parameters, and servers that
  apply them synchronously or as they arrive (notebook 07).
- `checkpoint`: everything a run needs to go on, saved and loaded with PyTorch's
  distributed checkpoint (notebook 09). Imported on its own (`from course_utils.parallel
  import checkpoint`): `torch.distributed.checkpoint` takes a second to import.
"""

from . import (
    allreduce,
    context_parallel,
    data_parallel,
    expert_parallel,
    parameter_server,
    pipeline,
    sequence_parallel,
    tensor_parallel,
    zero,
    zero3,
)
