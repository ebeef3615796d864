"""The native engine: the host executes the guest, T-SAR sites statically rewritten
into jumps to generated stubs; the guest runs in a contained worker process."""
