"""The Python engine: Unicorn runs scalar code, the project's vector layer runs every VEX
instruction and T-SAR through the golden semantics."""
