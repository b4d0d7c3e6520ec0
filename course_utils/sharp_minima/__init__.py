"""Chapter 2 (`02_sharp_minima.ipynb`): large batches end in sharper minima (Keskar et al. 2017).

It trains a small and a large batch to the same training loss and measures where each
landed: epsilon-sharpness, the top Hessian eigenvalue, and the loss along the line between
the two solutions (`landscape`), with the test accuracy that goes with them.
"""
