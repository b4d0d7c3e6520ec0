"""Chapter 6 (`06_model_parallel_pipelining.ipynb`): model parallelism and pipelining.

Tensor parallelism (each layer's neurons split across ranks, `tensor_parallel`), a
pipeline of stages on real ranks (`pipeline`), and the schedules themselves, GPipe and
1F1B, with their bubble and the activations they hold (`schedules`).
"""
