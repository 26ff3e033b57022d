"""Hoeffding statistics and the learners built on them: naive Bayes, the Hoeffding tree, the
adaptive random forest, the ABFS feature selector.
"""
