"""The proxy engine: the native engine with each T-SAR site replaced by uop-equivalent AVX2 in the
assembly source, for timing on silicon (results meaningless) (:class:`ProxyMachine`)."""

from tsar.sim.proxy_engine.machine import ProxyMachine, proxy_report, proxy_sequence, proxy_source

__all__ = ["ProxyMachine", "proxy_report", "proxy_sequence", "proxy_source"]
