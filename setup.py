"""Build hook: the native baseline kernels (``tsar.kernels._native``) are compiled by cffi."""

from setuptools import setup

setup(cffi_modules=["kernels/native/_build.py:ffibuilder"])
