"""Tools for developing with streamforest, never needed by a running worker.

The local Kafka broker from Maven jars (:mod:`worker.tools.dev.broker`), the demo
(:mod:`worker.tools.dev.demo`), dataset readers with the datasets the demo ships
(:mod:`worker.tools.dev.datasets`) and producers of instances (:mod:`worker.tools.dev.produce`). The
runtime never imports this package, and the worker image leaves it out.
"""
