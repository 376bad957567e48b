"""Durable runs on an existing engine, behind extras (DESIGN §8).

:mod:`surefoot.engines.temporal` runs an app's ``@app.workflow`` / ``@app.step`` code on a
Temporal cluster when the app's URL is ``temporal://…`` (``surefoot.durable.engine`` opens
it by the URL's scheme), and controls a local Temporal dev server (start it on loopback on
free ports, wait until it answers, stop it by pid) for the tests, the lab's Temporal port of
the 7-step agent and local use. See ``docs/engines.md``.
"""
