"""Countersign across hosts: network namespaces on one machine (python -m reliability.cluster)."""
