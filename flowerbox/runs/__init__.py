"""A run on the host, around its box: starting one (launch, detach), keeping a detached one
(supervise, diskwatch), its record in the host-only state (records), the commands' library
half (control), and what the host does once the box is gone (boundary, provenance).
"""
