"""The Python engine: Unicorn runs scalar code, the project's vector layer runs every VEX
instruction and T-SAR through the golden semantics (:class:`PythonMachine`; ``blocks`` compiles
straight runs of instructions, ``tsar_exec`` executes T-SAR, ``ucfast`` talks to Unicorn cheaply)."""

from tsar.sim.python_engine.machine import PythonMachine

__all__ = ["PythonMachine"]
