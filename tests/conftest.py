"""Shared pytest configuration."""

from hypothesis import settings

settings.register_profile("ci", max_examples=200, deadline=None)
settings.register_profile("default", deadline=None)
settings.load_profile("default")
