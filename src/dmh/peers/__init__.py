"""Methods added for comparison beyond the DMH paper's six baselines.

The classic linear reference CCA-ITQ, the deep unsupervised cross-modal hashing methods that came after
the paper (DJSRH, JDSH, DGCPN, UCCH) and the semi-paired methods (SPDH, SADCH). Each lives in its own
module and is reached through the method registry (``make_method("ucch")``); nothing is imported here,
so importing one method never pulls in the others (or PyTorch).

The deep peers' defaults are their authors' settings (network widths, epochs). Fitted on a CPU those
take minutes a fit (docs/peers.md, "The CPU setting and what it costs"); :data:`CPU_SETTINGS`
is the lighter setting for CPU budgets, each a few tens of CPU seconds on a couple of thousand
objects, with its measured cost in MAP in docs/peers.md::

    make_method("ucch", **CPU_SETTINGS["ucch"])
    dmh evaluate DATA --method ucch --param 'ucch.image_hidden=[2048,2048]' --param 'ucch.text_hidden=[2048]'
"""

__all__ = ["CPU_SETTINGS"]

#: the lighter setting of each deep peer whose authors' setting is costly on a CPU: narrower networks
#: (and, for JDSH and DGCPN, fewer epochs); ``dmh build --method auto`` fits its deep candidates so
CPU_SETTINGS: dict[str, dict] = {
    "djsrh": {"text_hidden": (1024,)},
    "jdsh": {"text_hidden": (1024,), "epochs": 100},
    "dgcpn": {"image_hidden": (1024,), "text_hidden": (1024,), "epochs": 35},
    "ucch": {"image_hidden": (2048, 2048), "text_hidden": (2048,)},
}
