"""Operator tools beside the runtime: ``tail``, ``topics``, ``catalog``, ``warmup``,
``evaluate`` and the development tools in ``dev`` (left out of the worker image).

The runtime (``worker`` outside this package) never imports them
(``tests/unit/test_layering.py``); they import the runtime.
"""
