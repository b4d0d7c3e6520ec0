"""Chapter 5 (`05_allreduce_algorithms.ipynb`): allreduce written on send/recv.

Parameter server, tree, butterfly and ring (`algorithms`), traced round by round and timed
against `dist.all_reduce` (`runs`, `explorer`), and compared with the alpha-beta cost
model fitted on the learner's machine (`cost_model`).
"""
