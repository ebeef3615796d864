"""Design-space sweeps: jobs on a pool or a Dask cluster, synthesized area per variant,
and the sweep report."""
