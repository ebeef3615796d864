"""The native engine: the host executes the guest, T-SAR sites statically rewritten into jumps to
generated stubs (``rewrite``) that run the configuration's C helper (``tsar_stubs``); calls run in
a contained worker process (``faults`` records a guest fault) (:class:`NativeMachine`)."""

from tsar.sim.native_engine.machine import NativeMachine, NativeStats

__all__ = ["NativeMachine", "NativeStats"]
