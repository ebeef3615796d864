"""What every layer shares, beneath isa: the user-error base class, the on-disk cache,
the gcc build cache and atomic writes."""
