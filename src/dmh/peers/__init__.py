"""Methods added for comparison beyond the DMH paper's six baselines.

The classic linear reference CCA-ITQ, the deep unsupervised cross-modal hashing methods that came after
the paper (DJSRH, JDSH, DGCPN, UCCH) and the semi-paired methods (SPDH, SADCH). Each lives in its own
module and is reached through the method registry (``make_method("ucch")``); nothing is imported here,
so importing one method never pulls in the others (or PyTorch).
"""
