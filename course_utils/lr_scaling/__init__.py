"""Chapter 3 (`03_linear_lr_scaling.ipynb`): the linear learning-rate scaling rule and warmup.

Goyal et al. 2017: k times the batch, k times the learning rate, with a gradual warmup;
the notebook sweeps the batch under three rules and finds where linear scaling breaks.
"""
