"""Shipped model files and the registry of known checkpoints."""
