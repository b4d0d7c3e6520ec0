"""The course as a whole: running the notebooks headless, the README's course map, and the
benchmarks found in the chapter folders.
"""
