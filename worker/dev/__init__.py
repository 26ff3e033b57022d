"""Tools for developing with streamforest, never needed by a running worker.

The local Kafka broker from Maven jars (:mod:`worker.dev.broker`), the demo
(:mod:`worker.dev.demo`), dataset readers with the datasets the demo ships
(:mod:`worker.dev.datasets`) and producers of instances (:mod:`worker.dev.produce`). The
runtime never imports this package, and the worker image leaves it out.
"""
