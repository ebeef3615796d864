"""Time estimates: a layer on a platform (model), the dataflow choice, whole-model
estimates and measured host timings."""
