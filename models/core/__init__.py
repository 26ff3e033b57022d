"""The learners' common ground: the learner surface, numba options, the random numbers, the shared
statistics and elementary functions, the tree arrays.
"""
