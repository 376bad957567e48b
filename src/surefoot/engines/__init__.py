"""Durable runs on an existing engine, behind extras (DESIGN §8).

Today this holds only :mod:`surefoot.engines.temporal`, the control of a local Temporal
dev server (start it on loopback on free ports, wait until it answers, stop it by pid),
used by the lab's Temporal port of the 7-step agent and by the tests. Running surefoot's
own ``@app.workflow`` / ``@app.step`` code on Temporal is meant to live here later.
"""
