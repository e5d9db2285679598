"""The websocket face: ``quicksilver serve`` and its reference client (docs/protocol.md)."""
