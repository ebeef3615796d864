"""Validating the timing model against the host: measured-versus-modelled cases and
the error bars derived from them."""
