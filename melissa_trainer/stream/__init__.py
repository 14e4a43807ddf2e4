"""Streaming transport: wire protocol and receiver (numpy and pyzmq only, no torch)."""
