"""CART kernels and the forests built from them: the block-forest rankers and the random forest on
a stream of features.
"""
