"""Chapter 1 (`01_sgd_vs_minibatch.ipynb`): gradient descent, SGD and mini-batch SGD.

It shows the noise of each, what an update and a second buy, the batch-size sweep of the
report, the gradient noise scale, and the report's parallel hyperparameter search: trials
run several at a time from a Comet-style JSON config (`sweep`), which chapters 2 and 3
reuse for their own sweeps.
"""
