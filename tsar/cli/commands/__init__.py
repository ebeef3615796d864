"""Sub-commands of the ``tsar`` CLI, one module each."""
