"""Baselines of the DMH paper's experiments (CVH, IMH, LSSH, STMH, CMFH, FSH).

Each lives in its own module and is reached through :mod:`dmh.methods` (``make_method("cvh")``);
nothing is imported here, so importing one baseline never pulls in the others.
"""
