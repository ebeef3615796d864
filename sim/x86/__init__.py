"""x86 instruction semantics shared by the engines and the tests: architectural state,
decoding, flags, and the vector, floating-point, BMI, gather and string operations."""
